package controller

import (
	"context"
	"fmt"
	"maps"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reloader-operator/reloader/internal/gate"
	"github.com/reloader-operator/reloader/internal/gate/rate"
	"github.com/reloader-operator/reloader/internal/ledger"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/report"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/whatchanged"
	"github.com/reloader-operator/reloader/internal/writer"
	"github.com/reloader-operator/reloader/internal/writer/evict"
)

// The reload pipeline of one reconcile:
//
//	observe -> plan (reload.Decide) -> gates (r.Gates, in order) -> rate (the pacer) -> write -> report
//
// decide runs it from the plan to the decision, for the controller (act) and, dry, for
// explain: the one place reload.Decide is called.

// decide makes the decision of one reconcile from the facts observed (f): the plan, then
// every gate of r.Gates in order (skipped while the coalescing window holds the changes), the
// changes they settle taken as recorded, then the rate limiter's slot for a reload that no gate
// holds, or the pacer's turn for a first record. Live, asking the pacer reserves the slot, a
// slot no longer needed goes back, and roll is asked to write the due changes into the copy to
// be written: when they leave the template as it was, nothing rolls. Dry (explain), nothing is
// reserved, remembered or announced, and roll is nil.
func (r *WorkloadReconciler) decide(ctx context.Context, obj client.Object, w seen, f reload.Facts, k string, dry bool, roll func([]reload.Change) bool) (reload.Decision, gate.Result, error) {
	var res gate.Result
	gated, rolled := false, false
	for {
		d := reload.Decide(f)
		switch {
		case d.Plan.Wait > 0:
			return d, res, nil
		case !gated:
			gated = true
			var err error
			if res, err = r.Gates.Check(ctx, r.due(obj, w, d.Plan, k, f.Now, dry)); err != nil {
				return d, res, err
			}
			settle(&f.Input, res.Settled)
			if res.Held != nil {
				f.Gate.Hold = res.Held.Hold
			}
			f.Gate.Notify = res.Notify
		case d.AskRate:
			wait := rate.Wait(r.Pacer, k, obj.GetNamespace(), f.Now, dry)
			if f.RateWait = &wait; wait > 0 {
				f.Rate = r.Pacer.String()
			}
		case d.AskFirstSight:
			wait := time.Duration(0)
			if !dry && !r.Ledger.Room(r.Kind.Name(), obj.GetNamespace(), obj.GetName()) {
				// The ledger writes its records within the budget, a namespace at a time.
				wait = r.Pacer.FirstSight(k, f.Now)
			}
			f.FirstSightWait = &wait
		case len(d.Reload) > 0 && roll != nil && !rolled:
			rolled = true
			if !roll(d.Reload) {
				// The template holds these values already: no roll, so no pause either.
				f.Unrolled = true
				continue
			}
			fallthrough
		default:
			if d.GiveBack && !dry {
				r.Pacer.Forget(k, f.Now)
			}
			if res.Requeue > 0 && (d.Requeue <= 0 || res.Requeue < d.Requeue) {
				d.Requeue = res.Requeue
			}
			return d, res, nil
		}
	}
}

// due is the gates' view of the reconcile of obj whose plan is p.
func (r *WorkloadReconciler) due(obj client.Object, w seen, p reload.Plan, k string, now time.Time, dry bool) gate.Due {
	d := gate.Due{Key: k, Kind: r.Kind.Name(), Target: obj, Changes: p.Changes, Overrides: w.overrides,
		Sources: make(map[source.ID]gate.Source, len(w.sources)), Live: r.observer().live(), Now: now, DryRun: dry}
	for id, o := range w.sources {
		d.Sources[id] = gate.Source{Object: o.Object(), Hash: o.Hash(), Annotations: o.Annotations()}
	}
	for _, ch := range p.Changes {
		// When the due content was written, as its newest writer tells (mode approve says
		// since when it waits).
		s, st := d.Sources[ch.ID], r.observer().sourceType(ch.ID.Kind)
		if s.Object == nil || st == nil || st.Pool != nil {
			continue
		}
		if wr, ok := st.Writer(s.Object); ok {
			s.Written = wr.Time
			d.Sources[ch.ID] = s
		}
	}
	d.What = func(changes []reload.Change) []whatchanged.Report { return r.observer().whatChanged(w, obj, changes) }
	if len(p.Changes) > 0 {
		d.Related = w.sources[p.Changes[0].ID].Object()
	}
	return d
}

// settle takes changes as recorded: the plan made again leaves them out.
func settle(in *reload.Input, changes []reload.Change) {
	if len(changes) == 0 {
		return
	}
	target := &in.Record
	if !in.HasRecord && in.Baseline != nil {
		target = &in.Baseline
	}
	rec := maps.Clone(*target)
	if rec == nil {
		rec = reload.Record{}
	}
	for _, ch := range changes {
		rec[ch.ID.String()] = ch.Hash
	}
	*target = rec
}

// ledgered keeps rec, the record d writes, in l, the ledger of first records, when obj, of kind, has
// no record annotation and d rolls nothing (a first record, or a record advanced without a
// reload, a notice's): the workload is then not written for it. A reload writes its record
// onto the workload.
func ledgered(l *ledger.Ledger, kind string, obj client.Object, d reload.Decision, rec string) bool {
	if _, annotated := obj.GetAnnotations()[reload.RecordAnnotation]; annotated || len(d.Reload) > 0 {
		return false
	}
	return l.Put(kind, obj.GetNamespace(), obj.GetName(), obj.GetUID(), rec)
}

// act runs the pipeline on obj, the copy of the workload read, and carries its decision out on
// a copy of it: one write when it differs, then one report (settle). A held reload is not
// written, record included, and comes back when the hold ends, to reload with the content of
// that time.
func (r *WorkloadReconciler) act(ctx context.Context, obj client.Object, w seen, f reload.Facts, k string) (reconcile.Result, string, error) {
	rep := r.Report
	updated := obj.DeepCopyObject().(client.Object)
	// touched tells whether any step below may have changed updated; when none did, it
	// equals obj without comparing them (most reconciles: a first record, a hold, nothing
	// due). Every step that changes updated sets it.
	touched := false
	d, res, err := r.decide(ctx, obj, w, f, k, false, func(changes []reload.Change) bool {
		touched = true
		return r.apply(ctx, updated, w, changes)
	})
	if err != nil {
		return reconcile.Result{}, "", err
	}
	if d.Plan.Wait > 0 {
		return coalescing(ctx, rep, k, d.Requeue)
	}
	dn := report.Outcome{Kind: r.Kind.Name(), Related: r.related(w, d.Plan)}
	rep.Invalid(ctx, obj, res.Invalid...)
	rep.Say(ctx, k, obj, dn.Related, append(res.Notices, r.rateNotice(obj, d, f.Now)...), len(d.Plan.Changes) > 0)
	if d.Outcome == reload.OutcomeWaiting {
		// A first record waiting for its turn comes back behind due reloads (priority.go).
		return reconcile.Result{RequeueAfter: d.Requeue, Priority: new(firstSightPriority)}, metrics.OutcomeWaiting, nil
	}
	if len(d.Reload) > 0 {
		dn.Reloaded, dn.What = d.Reload, r.observer().whatChanged(w, obj, d.Reload)
	}
	dn.Plan, dn.Pause = d.Plan, d.Pause
	annotate(updated, res.Annotate)
	touched = touched || len(res.Annotate) > 0
	if d.Plan.Reloads() && d.Hold.Reason == "" && d.WriteRecord {
		annotate(updated, res.Spend) // what the gates spend with the reload
		touched = touched || len(res.Spend) > 0
	}
	r.writeParts().evict.Mark(updated, w.restart, dn.Reloaded, d.Plan.Record)
	r.pause(ctx, updated, d.Pause)
	touched = touched || len(dn.Reloaded) > 0 || d.Pause.Pause || d.Pause.Resume || d.Pause.ClearPausedAt
	writes := w.tw.Changed() || touched && !equality.Semantic.DeepEqual(obj, updated)
	annotated, inLedger := false, false
	if d.WriteRecord {
		// A record that would be the whole write is kept in the ledger, when the workload
		// has no record annotation and nothing rolls (ledgered); else it goes with the write.
		rec := d.Plan.Record.Encode()
		if inLedger = !writes && ledgered(r.Ledger, r.Kind.Name(), obj, d, rec); !inLedger {
			setAnnotation(updated, reload.RecordAnnotation, rec)
			was, had := obj.GetAnnotations()[reload.RecordAnnotation]
			annotated, writes = true, writes || !had || was != rec
		}
	}
	switch {
	case d.Hold.Reason != "" && !d.Hold.Until.IsZero():
		rep.Waiting(k, d.Hold.Reason)
	case d.Hold.Reason == "" && d.Pause.Requeue > 0:
		rep.Waiting(k, reload.WaitPause)
	default:
		// A hold without end (an approval) waits for a person, not for time: not counted.
		rep.Waiting(k, "")
	}
	requeue := false
	if inLedger {
		rep.SayWritten(ctx, obj, dn.Related, res.Notices) // mode notify's, its record kept
	}
	if writes {
		var echo *echoWant
		if echoable(r.writeParts().write, obj, w, dn.Reloaded, r.observer().live()) {
			echo = r.parts.echoes.expect(obj, updated, r.Configs != nil)
		}
		dn.Failed = r.write(ctx, obj, updated, w, dn.Reloaded, d.Plan.Record)
		requeue = r.parts.echoes.settle(echo, updated, dn.Failed != nil)
		if dn.Failed == nil {
			dn.Wrote = true
			if annotated {
				// The workload holds its record now; a ledger entry would only shadow it.
				r.Ledger.Drop(r.Kind.Name(), obj.GetNamespace(), obj.GetName())
			}
			if w.restart != evict.Evict {
				// An evict restart reports its own progress (evict.Restarter); no rollout follows.
				r.Rollouts.Follow(r.Kind, updated, dn.Reloaded)
			}
			if first, ok := r.Window.FirstChange(k); ok {
				dn.Latency = r.Now().Sub(first)
			}
			rep.SayWritten(ctx, obj, dn.Related, res.Notices) // mode notify's, once its record is written
		}
	}
	res2, outcome, err := r.settle(ctx, obj, d, dn, k, f.Now)
	if requeue && err == nil && (res2.RequeueAfter <= 0 || res2.RequeueAfter > echoRequeue) {
		// An update dropped while the write was in flight was not its echo.
		res2.RequeueAfter = echoRequeue
	}
	return res2, outcome, err
}

// echoRequeue is how soon a workload whose update was dropped on trust, and was not the
// write's echo, is reconciled again.
const echoRequeue = time.Millisecond

// coalescing is the result of a reconcile of k that waits for the coalescing window to
// close, in wait; rep counts the wait.
func coalescing(ctx context.Context, rep *report.Reporter, k string, wait time.Duration) (reconcile.Result, string, error) {
	log.FromContext(ctx).V(1).Info("waiting for changes to settle", "wait", wait.String())
	rep.Waiting(k, reload.WaitCoalesce)
	// When the window closes, the reload goes ahead of first records (priority.go).
	return reconcile.Result{RequeueAfter: wait, Priority: new(reloadPriority)}, metrics.OutcomeWaiting, nil
}

// rateNotice is the announcement of a rate-limit hold (the rate step's, as for every kind).
func (r *WorkloadReconciler) rateNotice(obj client.Object, d reload.Decision, now time.Time) []gate.Said {
	return rate.Notice(r.Kind.Name(), obj.GetName(), d.Plan.Changes, d.Hold, now)
}

// annotate writes a gate's annotations into obj (a nil value removes the key).
func annotate(obj client.Object, set map[string]*string) {
	if len(set) == 0 {
		return
	}
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	for k, v := range set {
		if v == nil {
			delete(ann, k)
		} else {
			ann[k] = *v
		}
	}
	obj.SetAnnotations(ann)
}

// settle reports, once, what acting on d did (dn), and returns the reconcile's result: a
// write that failed is retried, or reported as refused; a held reload that wrote nothing
// reports nothing (its hold was announced).
func (r *WorkloadReconciler) settle(ctx context.Context, obj client.Object, d reload.Decision, dn report.Outcome, k string, started time.Time) (reconcile.Result, string, error) {
	rep := r.Report
	held := d.Outcome == reload.OutcomeHeld
	if dn.Failed != nil {
		what, refused := writer.RBACRefusal(dn.Failed)
		if refused && len(dn.Reloaded) > 0 {
			// The ReloadFail Event names what to grant, as a refused first record's does.
			dn.Failed = fmt.Errorf("reloader's RBAC does not allow %s: %w", what, dn.Failed)
		}
		rep.Done(ctx, obj, dn)
		if refused {
			return reconcile.Result{}, "", writer.Refused(ctx, r.writeParts().report, r.Kind.Name(), obj, len(dn.Reloaded) > 0, what, dn.Failed)
		}
		return reconcile.Result{}, "", fmt.Errorf("write %s: %w", k, dn.Failed)
	}
	res := reconcile.Result{RequeueAfter: d.Requeue}
	if held && !dn.Wrote {
		return res, metrics.OutcomeHeld, nil
	}
	if held {
		rep.Done(ctx, obj, dn)
		return res, metrics.OutcomeHeld, nil
	}
	// The coalescing window keeps a held change's first time, for the latency at the reload.
	r.Window.Done(k, started)
	return res, rep.Done(ctx, obj, dn), nil
}

// related is the source an Event about plan p refers to: the first changed (or skipped).
func (r *WorkloadReconciler) related(w seen, p reload.Plan) runtime.Object {
	if ch := p.Changes; len(ch) > 0 {
		return r.relatedRef(w.sources[ch[0].ID].Object())
	} else if ch := p.Skipped; len(ch) > 0 {
		return r.relatedRef(w.sources[ch[0].ID].Object())
	}
	return nil
}

func describe(changes []reload.Change) string { return report.Describe(changes) }
