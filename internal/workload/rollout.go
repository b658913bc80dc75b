package workload

import (
	"strconv"
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
		Description{Resource: extapi.ArgoGroupVersion.WithResource("rollouts"), Short: []string{"ro"}, Gate: ArgoRollouts},
		func(r *extapi.Rollout) *corev1.PodTemplateSpec { return &r.Spec.Template })
	k.custom = true
	return rollout{k}
}

func (rollout) Restart(obj client.Object, at time.Time) {
	t := metav1.NewTime(at.Truncate(time.Second))
	obj.(*extapi.Rollout).Spec.RestartAt = &t
}

func (rollout) References() string { return "Deployment" }

func (r rollout) TemplateRef(obj client.Object) string {
	ref := obj.(*extapi.Rollout).Spec.WorkloadRef
	if ref == nil || ref.Kind != r.References() {
		return ""
	}
	return ref.Name
}

// Progress reads an Argo Rollout's status: the generation observed (a string there), an
// abort or the Progressing condition, a pause, the replica counts, then whether the new pods
// were promoted to stable.
func (rollout) Progress(obj client.Object, gen int64) Progress {
	r := obj.(*extapi.Rollout)
	p := rolloutProgress(r, gen)
	p.Deadline = 600 * time.Second // Argo Rollouts' default
	if s := r.Spec.ProgressDeadlineSeconds; s != nil {
		p.Deadline = time.Duration(*s) * time.Second
	}
	return p
}

func rolloutProgress(r *extapi.Rollout, gen int64) Progress {
	if ref := r.Spec.WorkloadRef; ref != nil && ref.Name != "" {
		// A reload changes the Deployment's template, not the Rollout: its generation, and
		// so its status, can't tell the new rollout from the last one.
		return Progress{State: RolloutUntracked, Why: "runs the template of " + ref.Kind + " " + ref.Name + "; its rollout is not followed"}
	}
	observed, _ := strconv.ParseInt(r.Status.ObservedGeneration, 10, 64)
	if observed < gen {
		return unobserved(observed, gen)
	}
	c := replicas{desired: orOne(r.Spec.Replicas), updated: r.Status.UpdatedReplicas, ready: r.Status.ReadyReplicas,
		available: r.Status.AvailableReplicas, current: r.Status.Replicas}
	if r.Status.Abort {
		return stalled(c, "RolloutAborted", r.Status.Message)
	}
	if p, ok := conditionStalled(c, r.Status.Conditions); ok {
		return p
	}
	if (r.Spec.Paused || r.Status.Phase == "Paused") && !c.done() {
		return Progress{State: RolloutPaused, Why: "paused; " + c.String()}
	}
	p := c.progress()
	if p.State == RolloutComplete && r.Status.StableRS != "" && r.Status.StableRS != r.Status.CurrentPodHash {
		return Progress{State: RolloutProgressing, Why: c.String() + "; new pods not yet promoted to stable"}
	}
	return p
}

// conditionStalled reports a Progressing condition whose controller gave up.
func conditionStalled(c replicas, conds []extapi.Condition) (Progress, bool) {
	for _, cond := range conds {
		if cond.Type == "Progressing" && cond.Reason == ReasonProgressDeadlineExceeded {
			return stalled(c, cond.Reason, cond.Message), true
		}
	}
	return Progress{}, false
}
