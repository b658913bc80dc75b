package workload

import (
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Evictable kinds run a set of pods a label selector finds, which the Eviction API can
// restart one by one without a pod template change (reloader.dev/restart-strategy: evict).
type Evictable interface {
	// Selector selects the object's pods (among others, which ownership sorts out).
	Selector(obj client.Object) *metav1.LabelSelector
	// Desired is how many pods the object runs when all is well.
	Desired(obj client.Object) int32
}

func (deployment) Selector(obj client.Object) *metav1.LabelSelector {
	return obj.(*appsv1.Deployment).Spec.Selector
}
func (deployment) Desired(obj client.Object) int32 {
	return orOne(obj.(*appsv1.Deployment).Spec.Replicas)
}

func (statefulSet) Selector(obj client.Object) *metav1.LabelSelector {
	return obj.(*appsv1.StatefulSet).Spec.Selector
}
func (statefulSet) Desired(obj client.Object) int32 {
	return orOne(obj.(*appsv1.StatefulSet).Spec.Replicas)
}

func (daemonSet) Selector(obj client.Object) *metav1.LabelSelector {
	return obj.(*appsv1.DaemonSet).Spec.Selector
}
func (daemonSet) Desired(obj client.Object) int32 {
	return obj.(*appsv1.DaemonSet).Status.DesiredNumberScheduled
}
