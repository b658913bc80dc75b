package workload

import (
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
		func(d *appsv1.Deployment) *corev1.PodTemplateSpec { return &d.Spec.Template })}
}

func (deployment) Paused(obj client.Object) bool { return obj.(*appsv1.Deployment).Spec.Paused }
func (deployment) SetPaused(obj client.Object, paused bool) {
	obj.(*appsv1.Deployment).Spec.Paused = paused
}
