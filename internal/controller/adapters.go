package controller

import (
	"context"
	"maps"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reloader-operator/reloader/internal/approval"
	"github.com/reloader-operator/reloader/internal/flap"
	"github.com/reloader-operator/reloader/internal/gate"
	"github.com/reloader-operator/reloader/internal/source"
)

// Temporary adapters: the flap breaker (flap.go), the mode (approval.go) and the waves
// (waves.go) as gates of the pipeline, over the reconciler's code of today, until each moves
// to a package of its own under internal/gate. Each reads only its gate.Due.

// QuarantineGate is the flap breaker as a gate: a due change of a source in quarantine holds
// the reload; the quarantines that hold the workload's sources are kept on it.
func QuarantineGate(r *WorkloadReconciler) gate.Gate { return quarantineGate{r} }

// NotifyGate is mode notify as a gate: the due reload is reported instead of rolled.
func NotifyGate(r *WorkloadReconciler) gate.Gate { return notifyGate{r} }

// WaveGate is the health-gated waves as a gate.
func WaveGate(r *WorkloadReconciler) gate.Gate { return waveGate{r} }

// ApproveGate is mode approve as a gate: the due reload waits until approved.
func ApproveGate(r *WorkloadReconciler) gate.Gate { return approveGate{r} }

type quarantineGate struct{ r *WorkloadReconciler }

func (quarantineGate) Name() string { return flap.HoldReason }

func (g quarantineGate) Check(ctx context.Context, d gate.Due) (gate.Verdict, error) {
	r, w := g.r, g.r.seenOf(d)
	var v gate.Verdict
	if d.DryRun {
		// Explain has no flap table (the controller's memory), only what the workloads keep.
		if len(d.Changes) > 0 {
			v.Hold, _ = explainQuarantine(d.Target, d.Changes, d.Now)
		}
		return v, nil
	}
	if len(d.Changes) > 0 {
		h, err := r.quarantine(ctx, d.Target, d.Key, w, d.Changes, r.relatedRef(d.Related), d.Now)
		if err != nil {
			return v, err
		}
		v.Hold = h
	}
	// The record of the quarantines that hold the workload's sources, kept on it.
	scratch := &metav1.PartialObjectMetadata{}
	scratch.SetNamespace(d.Target.GetNamespace())
	scratch.SetName(d.Target.GetName())
	scratch.SetUID(d.Target.GetUID())
	scratch.SetAnnotations(maps.Clone(d.Target.GetAnnotations()))
	r.keepQuarantines(ctx, scratch, w, d.Now)
	before, had := d.Target.GetAnnotations()[flap.RecordAnnotation]
	switch after, has := scratch.GetAnnotations()[flap.RecordAnnotation]; {
	case has && (!had || after != before):
		v.Annotate = map[string]*string{flap.RecordAnnotation: &after}
	case had && !has:
		v.Annotate = map[string]*string{flap.RecordAnnotation: nil}
	}
	return v, nil
}

func (g quarantineGate) Forget(key string) { g.r.flapNotes.forget(key) }

type notifyGate struct{ r *WorkloadReconciler }

func (notifyGate) Name() string { return string(approval.Notify) }

func (g notifyGate) Check(_ context.Context, d gate.Due) (gate.Verdict, error) {
	if len(d.Changes) == 0 || d.Ahead != nil {
		return gate.Verdict{}, nil
	}
	m := g.r.gateFor(d.Target, g.r.seenOf(d), d.Changes, time.Time{})
	// The mode's unreadable settings are told here, once per reconcile.
	return gate.Verdict{Notify: m.Mode == approval.Notify, Invalid: m.Invalid}, nil
}

type waveGate struct{ r *WorkloadReconciler }

func (waveGate) Name() string { return "wave" }

func (g waveGate) Check(ctx context.Context, d gate.Due) (gate.Verdict, error) {
	r := g.r
	if r.Waves == nil || len(d.Changes) == 0 || d.Ahead != nil || d.Notify {
		return gate.Verdict{}, nil
	}
	w := r.seenOf(d)
	res := r.Waves.gate(ctx, r, d.Target, w, d.Changes, d.Now)
	if !d.DryRun {
		r.announceWave(ctx, d.Target, d.Key, res, d.Changes, r.relatedRef(d.Related))
	}
	return gate.Verdict{Hold: res.hold, Settled: res.aborted}, nil
}

func (g waveGate) Forget(key string) { g.r.Waves.forgetWaves(key) }

type approveGate struct{ r *WorkloadReconciler }

func (approveGate) Name() string { return string(approval.Approve) }

func (g approveGate) Check(ctx context.Context, d gate.Due) (gate.Verdict, error) {
	r := g.r
	var v gate.Verdict
	if len(d.Changes) == 0 || d.Ahead != nil || d.Notify {
		// Nothing due, or held or notified first (approval is asked for once its wave is due).
		if !d.DryRun {
			r.approvals.forget(d.Key, r.Metrics)
			r.publishPending(ctx, d.Target, "")
		}
		return v, nil
	}
	w := r.seenOf(d)
	m := r.gateFor(d.Target, w, d.Changes, time.Time{})
	if d.DryRun {
		if m.Hold != nil {
			v.Hold = *m.Hold
		}
		return v, nil
	}
	if m.Hold != nil && r.contentSince(w, d.Changes).IsZero() {
		// No writer known (a deleted source): since this process first saw it due.
		m = r.gateFor(d.Target, w, d.Changes, r.approvals.since(d.Key, m.Digest, d.Now))
	}
	if m.Hold != nil {
		v.Hold = *m.Hold
		if d.Live {
			v.Requeue = approvalPoll // no event tells of the approval written on it
		}
		r.announcePending(ctx, d.Target, d.Key, m, d.Changes, w, r.relatedRef(d.Related))
		r.publishPending(ctx, d.Target, m.Digest)
		return v, nil
	}
	r.approvals.forget(d.Key, r.Metrics)
	if m.Approved {
		// The approval is spent by the write of the reload.
		v.Spend = map[string]*string{approval.ApprovedAnnotation: nil, approval.PendingAnnotation: nil}
	} else {
		r.publishPending(ctx, d.Target, "")
	}
	return v, nil
}

func (g approveGate) Forget(key string) { g.r.approvals.forget(key, g.r.Metrics) }

// seenOf is what today's guardrail code reads of a reconcile, from the gates' view of it.
func (r *WorkloadReconciler) seenOf(d gate.Due) seen {
	w := seen{sources: make(map[source.ID]observed, len(d.Sources)), settings: r.settingsFor(d.Overrides), overrides: d.Overrides}
	for id, s := range d.Sources {
		var labels map[string]string
		if s.Object != nil {
			labels = s.Object.GetLabels()
		}
		w.sources[id] = observed{snapshot: snapshot{obj: s.Object, hash: s.Hash, annotations: s.Annotations, labels: labels}}
	}
	return w
}
