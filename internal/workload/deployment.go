package workload

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type deployment struct {
	typed[appsv1.Deployment, appsv1.DeploymentList, *appsv1.Deployment, *appsv1.DeploymentList]
}

// Deployment adapts apps/v1 Deployments.
func Deployment() Kind {
	return deployment{newTyped[appsv1.Deployment, appsv1.DeploymentList]("Deployment",
		Description{Resource: appsv1.SchemeGroupVersion.WithResource("deployments"), Short: []string{"deploy"}},
		func(d *appsv1.Deployment) *corev1.PodTemplateSpec { return &d.Spec.Template })}
}

func (deployment) Paused(obj client.Object) bool { return obj.(*appsv1.Deployment).Spec.Paused }
func (deployment) SetPaused(obj client.Object, paused bool) {
	obj.(*appsv1.Deployment).Spec.Paused = paused
}

// Progress follows what `kubectl rollout status` checks: the generation observed, the
// Progressing condition, then the replica counts.
func (deployment) Progress(obj client.Object, gen int64) Progress {
	d := obj.(*appsv1.Deployment)
	deadline := 600 * time.Second // the API server's default
	if s := d.Spec.ProgressDeadlineSeconds; s != nil {
		deadline = time.Duration(*s) * time.Second
	}
	p := deploymentProgress(d, gen)
	p.Deadline = deadline
	return p
}

func deploymentProgress(d *appsv1.Deployment, gen int64) Progress {
	if d.Status.ObservedGeneration < gen {
		return unobserved(d.Status.ObservedGeneration, gen)
	}
	c := replicas{desired: orOne(d.Spec.Replicas), updated: d.Status.UpdatedReplicas, ready: d.Status.ReadyReplicas,
		available: d.Status.AvailableReplicas, current: d.Status.Replicas}
	for _, cond := range d.Status.Conditions {
		if cond.Type == appsv1.DeploymentProgressing && cond.Reason == ReasonProgressDeadlineExceeded {
			return stalled(c, cond.Reason, cond.Message)
		}
	}
	if d.Spec.Paused && !c.done() {
		return Progress{State: RolloutPaused, Why: "paused; " + c.String()}
	}
	return c.progress()
}
