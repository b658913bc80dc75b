package workload

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/extapi"
)

type deploymentConfig struct {
	typed[extapi.DeploymentConfig, extapi.DeploymentConfigList, *extapi.DeploymentConfig, *extapi.DeploymentConfigList]
}

// DeploymentConfig adapts OpenShift's apps.openshift.io/v1 DeploymentConfigs.
func DeploymentConfig() Kind {
	k := newTyped[extapi.DeploymentConfig, extapi.DeploymentConfigList]("DeploymentConfig",
		Description{Resource: extapi.OpenShiftGroupVersion.WithResource("deploymentconfigs"), Short: []string{"dc"}, Gate: OpenShift},
		func(d *extapi.DeploymentConfig) *corev1.PodTemplateSpec {
			if d.Spec.Template == nil {
				// Nothing to reload; the indexer reads cached objects, so don't write to d.
				return &corev1.PodTemplateSpec{}
			}
			return d.Spec.Template
		})
	k.custom = true
	return deploymentConfig{k}
}

// Progress reads a DeploymentConfig's status as a Deployment's. Its own deadline (the
// strategy's timeoutSeconds) shows as the Progressing condition; the follower's deadline
// only backs it up.
func (deploymentConfig) Progress(obj client.Object, gen int64) Progress {
	d := obj.(*extapi.DeploymentConfig)
	if d.Status.ObservedGeneration < gen {
		return unobserved(d.Status.ObservedGeneration, gen)
	}
	c := replicas{desired: d.Spec.Replicas, updated: d.Status.UpdatedReplicas, ready: d.Status.ReadyReplicas,
		available: d.Status.AvailableReplicas, current: d.Status.Replicas}
	if p, ok := conditionStalled(c, d.Status.Conditions); ok {
		return p
	}
	if d.Spec.Paused && !c.done() {
		return Progress{State: RolloutPaused, Why: "paused; " + c.String()}
	}
	return c.progress()
}
