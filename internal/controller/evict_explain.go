package controller

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/workload"
)

// explainRestart says, for explain, how obj's pods restart and how far an evict restart under
// way has come, with the same step the reconcile makes (reload.PlanEviction).
func (r *WorkloadReconciler) explainRestart(ctx context.Context, obj client.Object, reloads bool, e *Explanation) {
	evict, err := reload.ParseRestartStrategy(obj.GetAnnotations()[reload.RestartStrategyAnnotation])
	_, evictable := r.Kind.(workload.Evictable)
	switch {
	case err != nil:
		e.Invalid = append(e.Invalid, err)
		return
	case !evict:
		return
	case !evictable:
		e.Invalid = append(e.Invalid, fmt.Errorf("annotation %s: a %s can't be restarted by eviction; changing the pod template", reload.RestartStrategyAnnotation, r.Kind.Name()))
		return
	case !r.EnableEvict:
		e.Restart = "evict, which is not enabled (--enable-evict-strategy)"
		if reloads {
			e.Restart += ": the reload waits until it is"
		}
		return
	}
	e.Restart = "evict: the pods are evicted one at a time, the template is left alone"
	v, ok := obj.GetAnnotations()[reload.EvictingAnnotation]
	if !ok {
		return
	}
	now := r.Now()
	st, err := reload.ParseEvicting(v, now)
	switch {
	case err != nil:
		e.Eviction = "ending: " + err.Error()
		return
	case st.Record != reload.RecordDigest(obj.GetAnnotations()[reload.RecordAnnotation]):
		e.Eviction = "ending: the restart does not belong to the record on the workload"
		return
	}
	ev := r.Kind.(workload.Evictable)
	pods, err := r.podsOf(ctx, obj, ev)
	if err != nil {
		e.Eviction = fmt.Sprintf("restarting the pods created before %s; pods not readable here: %v", st.Since.Format(time.RFC3339), err)
		return
	}
	state := make([]reload.EvictPod, 0, len(pods))
	for _, p := range pods {
		state = append(state, reload.EvictPod{Name: p.Name, Created: p.CreationTimestamp.Time, Ready: podReady(p), Terminating: p.DeletionTimestamp != nil})
	}
	step := reload.PlanEviction(st, state, ev.Desired(obj), now)
	switch {
	case step.Done:
		e.Eviction = "every pod created before " + st.Since.Format(time.RFC3339) + " is gone; the restart ends"
	case step.Evict != "":
		e.Eviction = fmt.Sprintf("%d pods created before %s left; next evicts %s", step.Left, st.Since.Format(time.RFC3339), step.Evict)
	default:
		e.Eviction = fmt.Sprintf("%d pods created before %s left; waiting: %s", step.Left, st.Since.Format(time.RFC3339), step.Why)
	}
}
