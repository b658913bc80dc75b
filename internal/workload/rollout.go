package workload

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/extapi"
)

type rollout struct {
	typed[extapi.Rollout, extapi.RolloutList, *extapi.Rollout, *extapi.RolloutList]
}

// Rollout adapts argoproj.io/v1alpha1 Rollouts.
func Rollout() Kind {
	k := newTyped[extapi.Rollout, extapi.RolloutList]("Rollout",
		func(r *extapi.Rollout) *corev1.PodTemplateSpec { return &r.Spec.Template })
	k.custom = true
	return rollout{k}
}

func (rollout) Restart(obj client.Object, at time.Time) {
	t := metav1.NewTime(at.Truncate(time.Second))
	obj.(*extapi.Rollout).Spec.RestartAt = &t
}

func (rollout) TemplateRef(obj client.Object) string {
	ref := obj.(*extapi.Rollout).Spec.WorkloadRef
	if ref == nil || ref.Kind != "Deployment" {
		return ""
	}
	return ref.Name
}
