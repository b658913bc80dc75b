package controller

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/workload"
)

// pause applies step, the pause-period step a decision made, to the copy of a Pausable
// workload that the reconcile writes.
func (r *WorkloadReconciler) pause(ctx context.Context, obj client.Object, step reload.PauseStep) {
	p, ok := r.Kind.(workload.Pausable)
	if !ok {
		return
	}
	keys := r.Policy.Keys
	ann := obj.GetAnnotations()
	if step.Invalid != nil {
		r.invalid(ctx, obj, step.Invalid)
	}
	switch {
	case step.Pause:
		p.SetPaused(obj, true)
		setAnnotation(obj, keys.PausedAt, step.PausedAt)
	case step.Resume:
		p.SetPaused(obj, false)
	}
	if step.ClearPausedAt {
		delete(ann, keys.PausedAt)
		obj.SetAnnotations(ann)
	}
}

// pauseState reads what a pause decision needs from obj, with period as the pause period
// when the workload's annotation sets none; ok is false for kinds that can't pause.
func (r *WorkloadReconciler) pauseState(obj client.Object, period *time.Duration) (workload.Pausable, reload.PauseState, bool) {
	p, ok := r.Kind.(workload.Pausable)
	if !ok {
		return nil, reload.PauseState{}, false
	}
	ann := obj.GetAnnotations()
	s := reload.PauseState{Paused: p.Paused(obj)}
	s.PausedAt, s.HasPausedAt = ann[r.Policy.Keys.PausedAt]
	s.Period, s.HasPeriod = ann[r.Policy.Keys.PausePeriod]
	if !s.HasPeriod && period != nil && *period > 0 {
		s.Period, s.HasPeriod = period.String(), true
	}
	return p, s, true
}
