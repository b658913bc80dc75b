package workload

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// Deployment adapts apps/v1 Deployments.
func Deployment() Kind {
	return newTyped[appsv1.Deployment, appsv1.DeploymentList]("Deployment",
		func(d *appsv1.Deployment) *corev1.PodTemplateSpec { return &d.Spec.Template })
}
