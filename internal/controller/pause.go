package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/workload"
)

// pause runs the pause-period annotation of a Deployment. A reload pauses the Deployment in
// the same write that changes its template, so the changes of the whole period roll out once,
// at resume. The paused-at annotation on the object, not a timer, holds the state: a restart
// or a new leader resumes on time. A Deployment paused without paused-at was paused by its
// user and is never resumed here.
func (r *WorkloadReconciler) pause(ctx context.Context, obj client.Object, reloading bool, now time.Time) (requeue time.Duration, resumed bool) {
	p, ok := r.Kind.(workload.Pausable)
	if !ok {
		return 0, false
	}
	keys := r.Policy.Keys
	ann := obj.GetAnnotations()
	at, ours := ann[keys.PausedAt]
	if !ours && (!reloading || p.Paused(obj)) {
		return 0, false
	}
	period, hasPeriod := time.Duration(0), false
	if v, ok := ann[keys.PausePeriod]; ok {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d <= 0 {
			r.invalid(ctx, obj, fmt.Errorf("annotation %s: %q is not a positive duration such as 5m; not pausing", keys.PausePeriod, v))
		} else {
			period, hasPeriod = d, true
		}
	}
	switch {
	case ours && !p.Paused(obj):
		// Resumed by someone else: the pause is over.
		delete(ann, keys.PausedAt)
		obj.SetAnnotations(ann)
	case ours:
		t, err := time.Parse(time.RFC3339, at)
		if err == nil && hasPeriod && now.Before(t.Add(period)) {
			return t.Add(period).Sub(now), false
		}
		p.SetPaused(obj, false)
		delete(ann, keys.PausedAt)
		obj.SetAnnotations(ann)
		return 0, true
	case hasPeriod:
		p.SetPaused(obj, true)
		setAnnotation(obj, keys.PausedAt, now.UTC().Format(time.RFC3339))
		return period, false
	}
	return 0, false
}
