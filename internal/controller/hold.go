package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/termsafe"
)

// ReasonReloadHeld is the Event of a reload held back by pacing.
const ReasonReloadHeld = "ReloadHeld"

// announceRateLimitAfter: a rate-limit hold shorter than this gets no Event (a log line at
// debug level): spreading a fan-out over a few seconds is routine, and one more Event per
// workload would double the writes it spreads.
const announceRateLimitAfter = 5 * time.Second

// holdState reads what reload.PlanHold needs from obj; a ReloaderConfig's interval and window
// (in set) apply where the workload's annotations set none.
func (r *WorkloadReconciler) holdState(obj client.Object, set settings) reload.HoldState {
	return reload.HoldStateOf(obj.GetAnnotations(), r.MinReloadInterval, set.minReloadInterval, set.reloadWindow, r.Policy.Caches)
}

// announceHold reports a held reload: the first time for this hold, an Event and a log line
// that say why and when it will happen; every time, at debug level.
func (r *WorkloadReconciler) announceHold(ctx context.Context, obj client.Object, k string, h reload.Hold, due []reload.Change, related runtime.Object) {
	logger := log.FromContext(ctx)
	at := h.Until.UTC().Format(time.RFC3339)
	if !r.waits.set(k, h.Reason, h.Until, r.Metrics) {
		logger.V(1).Info("reload held", "reason", h.Reason, "until", at)
		return
	}
	r.Metrics.Held.WithLabelValues(h.Reason).Inc()
	note := fmt.Sprintf("Reload of %s %s after change of %s held by %s; reloads at %s", r.Kind.Name(), obj.GetName(), describe(due), h.Why, at)
	if h.Reason == reload.HoldRateLimit && h.Until.Sub(r.Now()) < announceRateLimitAfter {
		logger.V(1).Info("reload held", "reason", h.Reason, "until", at)
		return
	}
	logger.Info("reload held", "reason", h.Reason, "why", h.Why, "until", at)
	r.Recorder.Eventf(obj, related, corev1.EventTypeNormal, ReasonReloadHeld, "Hold", "%s", termsafe.ClipNote(note))
}

// waiting remembers, per workload, why its reload waits now: the reloader_reloads_waiting
// gauge counts its entries by reason, and a hold is announced once, when it begins (or moves).
// Entries go when the workload reloads, stops waiting, or goes away: bounded by workloads.
type waiting struct {
	mu sync.Mutex
	m  map[string]waitingAs
}

type waitingAs struct {
	reason string
	// hold is the last hold announced; a coalescing wait in between does not announce it
	// again.
	hold struct {
		reason string
		until  time.Time
	}
}

// set records that key waits for reason (until, for a hold); it reports whether that is a
// hold not announced before.
func (w *waiting) set(key, reason string, until time.Time, m *metrics.Metrics) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]waitingAs{}
	}
	prev, had := w.m[key]
	if !had || prev.reason != reason {
		if had {
			m.Waiting.WithLabelValues(prev.reason).Dec()
		}
		m.Waiting.WithLabelValues(reason).Inc()
	}
	next := prev
	next.reason = reason
	isNew := false
	if !until.IsZero() && (prev.hold.reason != reason || !prev.hold.until.Equal(until)) {
		next.hold.reason, next.hold.until, isNew = reason, until, true
	}
	w.m[key] = next
	return isNew
}

// clear forgets that key waits.
func (w *waiting) clear(key string, m *metrics.Metrics) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if prev, had := w.m[key]; had {
		m.Waiting.WithLabelValues(prev.reason).Dec()
		delete(w.m, key)
	}
}
