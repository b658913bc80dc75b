package workload

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// DaemonSet adapts apps/v1 DaemonSets.
func DaemonSet() Kind {
	return newTyped[appsv1.DaemonSet, appsv1.DaemonSetList]("DaemonSet",
		func(d *appsv1.DaemonSet) *corev1.PodTemplateSpec { return &d.Spec.Template })
}
