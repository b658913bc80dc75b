package workload

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type daemonSet struct {
	typed[appsv1.DaemonSet, appsv1.DaemonSetList, *appsv1.DaemonSet, *appsv1.DaemonSetList]
}

// DaemonSet adapts apps/v1 DaemonSets.
func DaemonSet() Kind {
	return daemonSet{newTyped[appsv1.DaemonSet, appsv1.DaemonSetList]("DaemonSet",
		Description{Resource: appsv1.SchemeGroupVersion.WithResource("daemonsets"), Short: []string{"ds"}},
		func(d *appsv1.DaemonSet) *corev1.PodTemplateSpec { return &d.Spec.Template })}
}

// Progress reads the counts of scheduled daemon pods: a DaemonSet has no Progressing
// condition, so the follower's deadline decides when it has stalled.
func (daemonSet) Progress(obj client.Object, gen int64) Progress {
	d := obj.(*appsv1.DaemonSet)
	if d.Status.ObservedGeneration < gen {
		return unobserved(d.Status.ObservedGeneration, gen)
	}
	if d.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType {
		return Progress{State: RolloutUntracked, Why: "update strategy OnDelete: pods take the new template only when deleted"}
	}
	return replicas{desired: d.Status.DesiredNumberScheduled, updated: d.Status.UpdatedNumberScheduled,
		ready: d.Status.NumberReady, available: d.Status.NumberAvailable, current: -1}.progress()
}
