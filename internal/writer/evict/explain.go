package evict

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/workload"
)

// Explanation is what explain says of a workload's restart.
type Explanation struct {
	// Restart says how the pods restart, when not by a template change; empty otherwise.
	Restart string
	// Eviction says how far an evict restart under way has come; empty when none is.
	Eviction string
	// Invalid is the restart strategy annotation's error, if any.
	Invalid error
}

// Explain says, for explain, how obj's pods restart and how far an evict restart under way
// has come, with the same step the reconcile makes (reload.PlanEviction); reloads tells
// whether a reload is due.
func (x *Restarter) Explain(ctx context.Context, obj client.Object, reloads bool) (e Explanation) {
	evict, err := reload.ParseRestartStrategy(obj.GetAnnotations()[reload.RestartStrategyAnnotation])
	_, evictable := x.Kind.(workload.Evictable)
	switch {
	case err != nil:
		e.Invalid = err
		return e
	case !evict:
		return e
	case !evictable:
		e.Invalid = fmt.Errorf("annotation %s: a %s can't be restarted by eviction; changing the pod template", reload.RestartStrategyAnnotation, x.Kind.Name())
		return e
	case !x.Enabled:
		e.Restart = "evict, which is not enabled (--enable-evict-strategy)"
		if reloads {
			e.Restart += ": the reload waits until it is"
		}
		return e
	}
	e.Restart = "evict: the pods are evicted one at a time, the template is left alone"
	v, ok := obj.GetAnnotations()[reload.EvictingAnnotation]
	if !ok {
		return e
	}
	now := x.Now()
	st, err := reload.ParseEvicting(v, now)
	switch {
	case err != nil:
		e.Eviction = "ending: " + err.Error()
		return e
	case st.Record != reload.RecordDigest(obj.GetAnnotations()[reload.RecordAnnotation]):
		e.Eviction = "ending: the restart does not belong to the record on the workload"
		return e
	}
	ev := x.Kind.(workload.Evictable)
	pods, err := x.podsOf(ctx, obj, ev)
	if err != nil {
		e.Eviction = fmt.Sprintf("restarting the pods created before %s; pods not readable here: %v", st.Since.Format(time.RFC3339), err)
		return e
	}
	state := podStates(pods)
	step := reload.PlanEviction(st, state, ev.Desired(obj), now)
	switch {
	case step.Done:
		e.Eviction = "every pod created before " + st.Since.Format(time.RFC3339) + " is gone; the restart ends"
	case step.Evict != "":
		e.Eviction = fmt.Sprintf("%d pods created before %s left; next evicts %s", step.Left, st.Since.Format(time.RFC3339), step.Evict)
	default:
		e.Eviction = fmt.Sprintf("%d pods created before %s left; waiting: %s", step.Left, st.Since.Format(time.RFC3339), step.Why)
	}
	return e
}
