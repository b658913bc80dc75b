package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/reloader-operator/reloader/internal/alert"
	"github.com/reloader-operator/reloader/internal/approval"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/termsafe"
)

// The notify and approve modes in the reconcile (internal/approval decides). Where a reload is
// due, and no quarantine holds it, the mode is resolved (the workload's annotation, its changed
// sources', --mode): notify reports the reload and advances the record, nothing rolls; approve
// holds the reload until the workload's approval annotation names the digest of the due
// changes, and spends that annotation in the write of the reload.
//
// Nothing of it is kept by reloader on the objects for its decisions: the digest is computed
// from the sources, the time the content appeared from their writers (managedFields), the
// approval is the user's annotation. reloader publishes the digest that waits in the workload's
// approval.PendingAnnotation, so that `kubectl reloader approve` approves it without reading
// the hash key; it removes it once nothing waits (or in the write of the approved reload). A
// restart announces a pending approval once more, no more.

// approvalPoll is how often a reload waiting for approval is decided again when the workload
// is read without watch (degraded mode): no event tells of the approval written on it.
const approvalPoll = 30 * time.Second

// Event reasons of the approve mode.
const ReasonApprovalPending = "ApprovalPending"

// gateFor resolves the mode of a reload of due on obj and gates it (approval.Decide). since is
// the time the due content appeared, zero when unknown.
func (r *WorkloadReconciler) gateFor(obj client.Object, w seen, due []reload.Change, since time.Time) approval.Gate {
	mode, bad := approval.Resolve(obj.GetAnnotations(), due, func(ch reload.Change) map[string]string {
		return w.sources[ch.ID].annotations
	}, r.defaultMode(w.settings))
	if since.IsZero() {
		since = r.contentSince(w, due)
	}
	v, has := obj.GetAnnotations()[approval.ApprovedAnnotation]
	g := approval.Decide(mode, due, v, has, since, r.approveTarget(obj))
	g.Invalid = append(bad, g.Invalid...)
	return g
}

// defaultMode is the mode where no annotation sets one: a ReloaderConfig's, else --mode
// (reload when unset).
func (r *WorkloadReconciler) defaultMode(set settings) approval.Mode {
	switch {
	case set.mode != "":
		return set.mode
	case r.Mode == "":
		return approval.Reload
	}
	return r.Mode
}

// contentSince is when the due content appeared: the latest write of the changed sources, as
// their newest writer tells (the same in the controller's cache and in explain); zero when
// none is known (a deleted source).
func (r *WorkloadReconciler) contentSince(w seen, due []reload.Change) time.Time {
	var since time.Time
	for _, ch := range due {
		o := w.sources[ch.ID]
		st := r.sourceType(ch.ID.Kind)
		if o.obj == nil || st == nil || st.Pool != nil {
			continue
		}
		if wr, ok := st.writer(o.obj); ok && wr.Time.After(since) {
			since = wr.Time
		}
	}
	return since
}

// approveTarget is how `kubectl reloader approve` names obj.
func (r *WorkloadReconciler) approveTarget(obj client.Object) string {
	return strings.ToLower(r.Kind.Name()) + "/" + obj.GetName() + " -n " + obj.GetNamespace()
}

// publishPending writes digest, the content obj's reload waits for, into its
// approval.PendingAnnotation, or removes the annotation (digest ""), when it says otherwise. A
// write that fails is logged: the ApprovalPending Event names the digest too, and the next
// reconcile writes it again.
func (r *WorkloadReconciler) publishPending(ctx context.Context, obj client.Object, digest string) {
	cur, has := obj.GetAnnotations()[approval.PendingAnnotation]
	if (digest == "" && !has) || (digest != "" && cur == digest) {
		return
	}
	var v any
	if digest != "" {
		v = digest
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{approval.PendingAnnotation: v}}})
	if err == nil {
		target := r.Kind.NewObject()
		target.SetNamespace(obj.GetNamespace())
		target.SetName(obj.GetName())
		err = r.Client.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldOwner))
	}
	if err != nil {
		log.FromContext(ctx).Error(err, "the digest waiting for approval not published on the workload", "annotation", approval.PendingAnnotation, "digest", digest)
	}
}

// announcePending reports a reload waiting for approval once per content: an Event, a log
// line, an alert and the held counter; the pending gauge counts the workload while it waits.
func (r *WorkloadReconciler) announcePending(ctx context.Context, obj client.Object, k string, g approval.Gate, due []reload.Change, w seen, related runtime.Object) {
	logger := log.FromContext(ctx)
	if !r.approvals.pending(k, g.Digest, r.Metrics) {
		logger.V(1).Info("reload waits for approval", "digest", g.Digest)
		return
	}
	r.Metrics.Held.WithLabelValues(g.Hold.Reason).Inc()
	sources := alert.SourcesOf(due, r.whatChanged(w, obj, due)...)
	note := fmt.Sprintf("Reload of %s %s after change of %s: %s", r.Kind.Name(), obj.GetName(), alert.Describe(sources), g.Hold.Why)
	logger.Info("reload waits for approval", "digest", g.Digest, "why", g.Hold.Why)
	r.Recorder.Eventf(obj, related, corev1.EventTypeNormal, ReasonApprovalPending, "Hold", "%s", termsafe.ClipNote(note))
	r.Alerts.Queue(alert.Reload{Kind: r.Kind.Name(), Namespace: obj.GetNamespace(), Name: obj.GetName(), Sources: sources, Time: r.Now(), Held: g.Hold.Why, Mode: alert.ModeApprove})
}

// approvals remembers, per workload, the content whose approval it waits for (announced once)
// and when this process first saw it due, when no writer tells. Bounded by the workloads whose
// reload waits for approval.
type approvals struct {
	mu sync.Mutex
	m  map[string]pendingApproval
}

type pendingApproval struct {
	digest string
	first  time.Time
	// announced: the Event for digest went out; counted: the gauge counts the workload.
	announced, counted bool
}

// since is when this process first saw digest due on k (now, the first time).
func (a *approvals) since(k, digest string, now time.Time) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]pendingApproval{}
	}
	p := a.m[k]
	if p.digest != digest || p.first.IsZero() {
		p.digest, p.first, p.announced = digest, now, false
		a.m[k] = p
	}
	return p.first
}

// pending marks k as waiting for approval of digest; it reports whether that is news (not
// announced before). The gauge counts each workload once, whatever the content.
func (a *approvals) pending(k, digest string, m *metrics.Metrics) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]pendingApproval{}
	}
	p := a.m[k]
	if !p.counted {
		m.PendingApproval.Inc()
		p.counted = true
	}
	news := !p.announced || p.digest != digest
	if p.digest != digest {
		p.first = time.Time{}
	}
	p.digest, p.announced = digest, true
	a.m[k] = p
	return news
}

// forget drops what is kept about k, and its count in the gauge.
func (a *approvals) forget(k string, m *metrics.Metrics) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p, ok := a.m[k]; ok {
		if p.counted {
			m.PendingApproval.Dec()
		}
		delete(a.m, k)
	}
}
