package controller

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/reload"
)

// act carries out decision d, made from facts f, on a copy of the workload: it asks the
// pacer what d needs from it (pace), writes the copy in one request when it differs, and
// reports what happened once (settle). A held reload is not written, record included, and
// comes back when the hold ends, to reload with the content of that time.
func (r *WorkloadReconciler) act(ctx context.Context, obj client.Object, w seen, f *reload.Facts, d reload.Decision, k string) (reconcile.Result, string, error) {
	if d.Plan.Wait > 0 {
		log.FromContext(ctx).V(1).Info("waiting for changes to settle", "wait", d.Plan.Wait.String())
		r.waits.set(k, reload.WaitCoalesce, time.Time{}, r.Metrics)
		// When the window closes, the reload goes ahead of first records (priority.go).
		return reconcile.Result{RequeueAfter: d.Requeue, Priority: new(reloadPriority)}, metrics.OutcomeWaiting, nil
	}
	dn := done{related: r.related(w, d.Plan)}
	if d.Plan.Reloads() && f.Quarantine == nil {
		// The flap breaker first (flap.go): a quarantine holds past any pacing.
		h, err := r.quarantine(ctx, obj, k, w, d.Plan.Changes, dn.related, f.Now)
		if err != nil {
			return reconcile.Result{}, "", err
		}
		if h.Reason != "" {
			f.Quarantine = &h
			d = reload.Decide(*f)
		}
	}
	if d.Plan.Reloads() && f.Quarantine == nil && f.Wave == nil && r.wave(ctx, obj, k, w, f, dn.related) {
		// Health-gated waves (waves.go): an aborted content is recorded, a wave holds.
		d = reload.Decide(*f)
	}
	// Then the mode (approval.go): notify reports instead, approve holds until approved
	// (once its wave is due).
	d, gate := r.gate(ctx, obj, k, w, f, d, dn.related)
	if d = r.pace(ctx, obj, f, d, k, dn); d.Outcome == reload.OutcomeWaiting {
		// A first record waiting for its turn comes back behind due reloads (priority.go).
		return reconcile.Result{RequeueAfter: d.Requeue, Priority: new(firstSightPriority)}, metrics.OutcomeWaiting, nil
	}
	updated := obj.DeepCopyObject().(client.Object)
	r.keepQuarantines(ctx, updated, w, f.Now)
	if len(d.Reload) > 0 {
		if r.apply(ctx, updated, w, d.Reload) {
			dn.reloaded = d.Reload
			dn.what = r.whatChanged(w, obj, d.Reload)
		} else {
			// The template holds these values already: no roll, so no pause either.
			f.Unrolled = true
			d = reload.Decide(*f)
		}
	}
	dn.plan, dn.pause = d.Plan, d.Pause
	if d.LastReload != "" {
		setAnnotation(updated, reload.LastReloadAnnotation, d.LastReload)
	}
	if d.WriteRecord {
		setAnnotation(updated, reload.RecordAnnotation, d.Plan.Record.Encode())
	}
	spendApproval(updated, gate, d)
	r.markEviction(updated, w, dn.reloaded, d.Plan.Record)
	r.pause(ctx, updated, d.Pause)
	switch {
	case d.Hold.Reason != "": // announced by pace
	case d.Pause.Requeue > 0:
		r.waits.set(k, reload.WaitPause, time.Time{}, r.Metrics)
	default:
		r.waits.clear(k, r.Metrics)
	}
	if !equality.Semantic.DeepEqual(obj, updated) || w.tw.changed() {
		if dn.failed = r.write(ctx, obj, updated, w, dn.reloaded, d.Plan.Record); dn.failed == nil {
			dn.wrote = true
			if w.restart != restartEvict {
				// An evict restart reports its own progress (evict.go); no rollout follows.
				r.Rollouts.Follow(r.Kind, updated, dn.reloaded)
			}
			if first, ok := r.Window.FirstChange(k); ok {
				dn.latency = r.Now().Sub(first)
			}
			if len(d.Notified) > 0 {
				r.reportNotified(ctx, obj, w, d.Notified, dn.related)
			}
		}
	}
	return r.settle(ctx, obj, d, dn, k, f.Now)
}

// pace asks the pacer what decision d needs from it (a rate slot for a due reload, a turn for
// a first record: asking reserves it), decides again with the answer, gives back a slot no
// longer needed, and tells of the hold, if any.
func (r *WorkloadReconciler) pace(ctx context.Context, obj client.Object, f *reload.Facts, d reload.Decision, k string, dn done) reload.Decision {
	switch {
	case d.AskRate:
		wait := r.Pacer.Reload(k, obj.GetNamespace(), f.Now)
		if f.RateWait = &wait; wait > 0 {
			f.Rate = r.Pacer.String()
		}
		d = reload.Decide(*f)
	case d.AskFirstSight:
		wait := r.Pacer.FirstSight(k, f.Now)
		f.FirstSightWait = &wait
		d = reload.Decide(*f)
	}
	if d.GiveBack {
		r.Pacer.Forget(k, f.Now)
	}
	if len(d.Hold.Invalid) > 0 {
		r.invalid(ctx, obj, d.Hold.Invalid...)
	}
	if d.Hold.Reason != "" && f.Quarantine == nil && f.Wave == nil && f.Approval == nil { // announced by the breaker, the waves, approval.go
		r.announceHold(ctx, obj, k, d.Hold, d.Plan.Changes, dn.related)
	}
	return d
}

// settle reports, once, what acting on d did (dn), and returns the reconcile's result: a
// write that failed is retried, or reported as refused; a held reload that wrote nothing
// reports nothing (its hold was announced).
func (r *WorkloadReconciler) settle(ctx context.Context, obj client.Object, d reload.Decision, dn done, k string, started time.Time) (reconcile.Result, string, error) {
	held := d.Outcome == reload.OutcomeHeld
	if dn.failed != nil {
		r.report(ctx, obj, dn)
		if what, ok := rbacRefusal(dn.failed); ok {
			return reconcile.Result{}, "", r.refused(ctx, obj, dn, what)
		}
		return reconcile.Result{}, "", fmt.Errorf("write %s: %w", k, dn.failed)
	}
	res := reconcile.Result{RequeueAfter: d.Requeue}
	if held && !dn.wrote {
		return res, metrics.OutcomeHeld, nil
	}
	if held {
		r.report(ctx, obj, dn)
		return res, metrics.OutcomeHeld, nil
	}
	// The coalescing window keeps a held change's first time, for the latency at the reload.
	r.Window.Done(k, started)
	return res, r.report(ctx, obj, dn), nil
}

// related is the source an Event about plan p refers to: the first changed (or skipped).
func (r *WorkloadReconciler) related(w seen, p reload.Plan) runtime.Object {
	if ch := p.Changes; len(ch) > 0 {
		return r.relatedRef(w.sources[ch[0].ID].obj)
	} else if ch := p.Skipped; len(ch) > 0 {
		return r.relatedRef(w.sources[ch[0].ID].obj)
	}
	return nil
}
