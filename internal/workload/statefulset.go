package workload

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// StatefulSet adapts apps/v1 StatefulSets.
func StatefulSet() Kind {
	return newTyped[appsv1.StatefulSet, appsv1.StatefulSetList]("StatefulSet",
		func(s *appsv1.StatefulSet) *corev1.PodTemplateSpec { return &s.Spec.Template })
}
