package workload

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type statefulSet struct {
	typed[appsv1.StatefulSet, appsv1.StatefulSetList, *appsv1.StatefulSet, *appsv1.StatefulSetList]
}

// StatefulSet adapts apps/v1 StatefulSets.
func StatefulSet() Kind {
	return statefulSet{newTyped[appsv1.StatefulSet, appsv1.StatefulSetList]("StatefulSet",
		Description{Resource: appsv1.SchemeGroupVersion.WithResource("statefulsets"), Short: []string{"sts"}},
		func(s *appsv1.StatefulSet) *corev1.PodTemplateSpec { return &s.Spec.Template })}
}

// Progress reads the update revision and the replica counts: a StatefulSet has no
// Progressing condition, so the follower's deadline decides when it has stalled.
func (statefulSet) Progress(obj client.Object, gen int64) Progress {
	s := obj.(*appsv1.StatefulSet)
	if s.Status.ObservedGeneration < gen {
		return unobserved(s.Status.ObservedGeneration, gen)
	}
	if s.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return Progress{State: RolloutUntracked, Why: "update strategy OnDelete: pods take the new template only when deleted"}
	}
	c := replicas{desired: orOne(s.Spec.Replicas), updated: s.Status.UpdatedReplicas, ready: s.Status.ReadyReplicas,
		available: s.Status.AvailableReplicas, current: -1}
	if ru := s.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil && *ru.Partition > 0 {
		// Only the pods at or above the partition ordinal are updated.
		want := max(c.desired-*ru.Partition, 0)
		why := fmt.Sprintf("%d of %d replicas above partition %d updated, %d ready, %d available",
			c.updated, want, *ru.Partition, c.ready, c.available)
		if c.updated >= want && c.ready >= c.desired && c.available >= c.desired {
			return Progress{State: RolloutComplete, Why: why}
		}
		return Progress{State: RolloutProgressing, Why: why}
	}
	p := c.progress()
	if p.State == RolloutComplete && s.Status.UpdateRevision != s.Status.CurrentRevision {
		p = Progress{State: RolloutProgressing, Why: c.String() + "; revision " + s.Status.UpdateRevision + " not yet current"}
	}
	return p
}
