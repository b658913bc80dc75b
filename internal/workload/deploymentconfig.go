package workload

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/reloader-operator/reloader/internal/extapi"
)

// DeploymentConfig adapts OpenShift's apps.openshift.io/v1 DeploymentConfigs.
func DeploymentConfig() Kind {
	k := newTyped[extapi.DeploymentConfig, extapi.DeploymentConfigList]("DeploymentConfig",
		func(d *extapi.DeploymentConfig) *corev1.PodTemplateSpec {
			if d.Spec.Template == nil {
				// Nothing to reload; the indexer reads cached objects, so don't write to d.
				return &corev1.PodTemplateSpec{}
			}
			return d.Spec.Template
		})
	k.custom = true
	return k
}
