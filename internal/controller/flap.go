package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/reloader-operator/reloader/internal/alert"
	"github.com/reloader-operator/reloader/internal/flap"
	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/termsafe"
)

// The flap breaker in the reconcile (internal/flap decides). Each source watch feeds every
// content change, with its writer, to the shared flap.Table (observeFlaps); where a reload is
// decided, a reload due to a source in quarantine is held (quarantine), and the quarantines
// that hold a workload are kept on it (keepQuarantines).
//
// Where the state lives: on each workload it holds, in flap.RecordAnnotation, under a MAC of
// the install key (as Job replacement records are, records.go). A restart reads it back, so a
// flap that began before it stays held. Not on the source: a source's annotations are the
// tenant's input, reloader may not write sources at all, and a record there could be forged
// or removed to release a flap. Not in one reloader-owned object: every replica and shard
// would contend on it, and it would grow with every source of the cluster. A tenant who may
// write the workload can delete the record, which releases only that workload's hold, which
// they could roll anyway; they can't forge one. Without a valid install key (a run outside a
// namespace of reloader's own) the quarantines live in memory only.

// Event reasons of the flap breaker.
const (
	ReasonSourceQuarantined  = "SourceQuarantined"
	ReasonQuarantineReleased = "QuarantineReleased"
)

// observeFlaps is a predicate that lets every event through and feeds st's content changes
// to the flap table.
func (r *WorkloadReconciler) observeFlaps(st SourceType) predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			if r.Flaps == nil || st.Pool != nil {
				return true
			}
			from, to := cachedHash(e.ObjectOld), cachedHash(e.ObjectNew)
			if from == to || from == "" || to == "" {
				return true
			}
			// The manager whose entry this write changed (copied out of the cache's string).
			wr, _ := changeWriter(e.ObjectOld, e.ObjectNew)
			n := e.ObjectNew
			r.Flaps.Observe(flap.Key{Namespace: n.GetNamespace(), Kind: string(st.Kind), Name: n.GetName()},
				flap.Change{At: r.Now(), Version: n.GetResourceVersion(), From: from, To: to, Writer: wr}, n.GetAnnotations())
			return true
		},
		DeleteFunc: func(e event.DeleteEvent) bool {
			r.Flaps.Forget(flap.Key{Namespace: e.Object.GetNamespace(), Kind: string(st.Kind), Name: e.Object.GetName()})
			return true
		},
	}
}

// quarantine holds a due reload whose changes come from a source in quarantine, until the
// latest of their ends; it honours a release annotation, takes over the quarantines recorded
// on the workload (after a restart), and announces a hold once per quarantine.
func (r *WorkloadReconciler) quarantine(ctx context.Context, obj client.Object, k string, w seen, due []reload.Change, related runtime.Object, now time.Time) (reload.Hold, error) {
	if r.Flaps == nil {
		return reload.Hold{}, nil
	}
	if err := r.adoptQuarantines(ctx, obj, now); err != nil {
		return reload.Hold{}, err
	}
	var h reload.Hold
	var held []string
	for _, ch := range due {
		key := flap.Key{Namespace: obj.GetNamespace(), Kind: string(ch.ID.Kind), Name: ch.ID.Name}
		if o := w.sources[ch.ID].obj; o != nil {
			_, bad := flap.ParseLimits(o.GetAnnotations(), r.Flaps.Defaults())
			r.invalid(ctx, obj, bad...)
			r.released(ctx, obj, key, ch.ID, o.GetAnnotations(), now)
		}
		q, ok := r.Flaps.Status(key, now)
		if !ok {
			continue
		}
		if h.Reason == "" || q.Until().After(h.Until) {
			h.Until = q.Until()
		}
		h.Reason = flap.HoldReason
		held = append(held, fmt.Sprintf("%s quarantined by the flap breaker since %s (%s); release: kubectl reloader release %s -n %s",
			sourceName(ch.ID), q.Since.UTC().Format(time.RFC3339), q.What(), ch.ID, obj.GetNamespace()))
	}
	if h.Reason == "" {
		r.flapNotes.forget(k)
		return h, nil
	}
	h.Why = strings.Join(held, "; ")
	r.Pacer.Forget(k, now) // a slot it reserved goes back; it takes one when released
	r.announceQuarantine(ctx, obj, k, h, due, related)
	return h, nil
}

// released ends the quarantine of a source whose release annotation names a time at or after
// its start; a bad or future one is reported.
func (r *WorkloadReconciler) released(ctx context.Context, obj client.Object, key flap.Key, id source.ID, ann map[string]string, now time.Time) {
	v, ok := ann[flap.ReleaseAnnotation]
	if !ok {
		return
	}
	at, err := flap.ParseRelease(v, now)
	if err != nil {
		r.invalid(ctx, obj, err)
		return
	}
	if r.Flaps.Release(key, at, now) {
		log.FromContext(ctx).Info("quarantine released", "source", id.String(), "release", at.UTC().Format(time.RFC3339))
		r.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, ReasonQuarantineReleased, "Release",
			"Quarantine of %s released by its %s annotation (%s); reloading on its latest content", sourceName(id), flap.ReleaseAnnotation, at.UTC().Format(time.RFC3339))
	}
}

// announceQuarantine reports a quarantine hold once per set of quarantines: a Warning Event on
// the workload and a log line that say what was seen and who wrote it, an alert, and the held
// counter.
func (r *WorkloadReconciler) announceQuarantine(ctx context.Context, obj client.Object, k string, h reload.Hold, due []reload.Change, related runtime.Object) {
	logger := log.FromContext(ctx)
	if !r.flapNotes.first(k, h.Why) {
		logger.V(1).Info("reload held", "reason", h.Reason, "until", h.Until.UTC().Format(time.RFC3339))
		return
	}
	r.Metrics.Held.WithLabelValues(h.Reason).Inc()
	note := fmt.Sprintf("Reloads of %s %s after changes of %s held: %s; reloads once quiet, at %s at the earliest",
		r.Kind.Name(), obj.GetName(), describe(due), h.Why, h.Until.UTC().Format(time.RFC3339))
	logger.Info("reload held: source quarantined", "why", h.Why, "until", h.Until.UTC().Format(time.RFC3339))
	r.Recorder.Eventf(obj, related, corev1.EventTypeWarning, ReasonSourceQuarantined, "Hold", "%s", termsafe.ClipNote(note))
	r.Alerts.Queue(alert.Reload{Kind: r.Kind.Name(), Namespace: obj.GetNamespace(), Name: obj.GetName(), Sources: alert.SourcesOf(due), Time: r.Now(), Held: h.Why})
}

// flapNotes remembers, per workload, the quarantine hold last announced (its description
// without times that move: each quarantine once). Bounded by the workloads held.
type flapNotes struct {
	mu sync.Mutex
	m  map[string]string
}

func (n *flapNotes) first(k, why string) bool {
	// Announced again when the sources or their starts differ, not when a count moves.
	sig := quarantineSignature(why)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil {
		n.m = map[string]string{}
	}
	if n.m[k] == sig {
		return false
	}
	n.m[k] = sig
	return true
}

func (n *flapNotes) forget(k string) {
	n.mu.Lock()
	delete(n.m, k)
	n.mu.Unlock()
}

// quarantineSignature keeps, of a hold's description, each source and its start.
func quarantineSignature(why string) string {
	var sig []string
	for part := range strings.SplitSeq(why, "; ") {
		if head, _, ok := strings.Cut(part, " ("); ok && strings.Contains(head, " since ") {
			sig = append(sig, head)
		}
	}
	return strings.Join(sig, "|")
}

// sourceName is "Secret creds".
func sourceName(id source.ID) string { return id.Kind.Title() + " " + id.Name }

// subject names obj for the MAC of its quarantine record.
func (r *WorkloadReconciler) subject(obj client.Object) flap.Subject {
	return flap.Subject{Kind: r.Kind.Name(), Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: string(obj.GetUID())}
}

// quarantineKey is the install key that seals quarantine records; not Valid when there is
// none (then quarantines are kept in memory only).
func (r *WorkloadReconciler) quarantineKey(ctx context.Context) hash.Key {
	key, err := r.recordKey(ctx)
	if err != nil {
		return hash.Key{}
	}
	return key
}

// adoptQuarantines takes over the quarantines recorded on obj, when the record is reloader's
// (its MAC is valid for this workload); another is reported and ignored. An error when the
// install key has not loaded yet (just after a restart, on a busy API server): the reconcile
// is retried rather than going ahead as if the record were not there; for keyPatience at most
// (a key that never loads must not hold reloads for good).
func (r *WorkloadReconciler) adoptQuarantines(ctx context.Context, obj client.Object, now time.Time) error {
	v, ok := obj.GetAnnotations()[flap.RecordAnnotation]
	if !ok {
		return nil
	}
	key, err := r.recordKey(ctx)
	if err != nil {
		if r.keyWaits.patient(now) {
			return fmt.Errorf("read the quarantine record: %w", err)
		}
		log.FromContext(ctx).Error(err, "the install key has not loaded for minutes: the quarantine record on this workload is not read, its reloads go ahead")
		return nil
	}
	if !key.Valid() {
		return nil
	}
	entries, err := flap.Open(key, r.subject(obj), v)
	if err != nil {
		log.FromContext(ctx).Info("ignoring quarantine record", "annotation", flap.RecordAnnotation, "error", err.Error())
		return nil
	}
	for _, e := range entries {
		if id, ok := source.ParseID(e.Source); ok {
			r.Flaps.Adopt(flap.Key{Namespace: obj.GetNamespace(), Kind: string(id.Kind), Name: id.Name}, e.Quarantine(), now)
		}
	}
	return nil
}

// keepQuarantines writes, into updated, the record of the quarantines that hold its sources
// now, or removes the record when none does.
func (r *WorkloadReconciler) keepQuarantines(ctx context.Context, updated client.Object, w seen, now time.Time) {
	if r.Flaps == nil {
		return
	}
	var entries []flap.Entry
	for id := range w.sources {
		if q, ok := r.Flaps.Status(flap.Key{Namespace: updated.GetNamespace(), Kind: string(id.Kind), Name: id.Name}, now); ok {
			entries = append(entries, flap.FromQuarantine(id.String(), q))
		}
	}
	ann := updated.GetAnnotations()
	_, had := ann[flap.RecordAnnotation]
	if len(entries) == 0 {
		if had {
			delete(ann, flap.RecordAnnotation)
			updated.SetAnnotations(ann)
		}
		return
	}
	key := r.quarantineKey(ctx)
	if !key.Valid() {
		return
	}
	slices.SortFunc(entries, func(a, b flap.Entry) int { return b.Last.Compare(a.Last) })
	entries = entries[:min(len(entries), flap.MaxEntries)]
	if v := flap.Seal(key, r.subject(updated), entries); ann[flap.RecordAnnotation] != v {
		setAnnotation(updated, flap.RecordAnnotation, v)
	}
}

// explainQuarantine is, for explain, the quarantine recorded on obj that holds a due change:
// explain has no flap table (the controller's memory), only what the workloads keep.
func explainQuarantine(obj client.Object, due []reload.Change, now time.Time) (reload.Hold, bool) {
	entries, err := flap.Peek(obj.GetAnnotations()[flap.RecordAnnotation])
	if err != nil {
		return reload.Hold{}, false
	}
	var h reload.Hold
	var held []string
	for _, e := range entries {
		q := e.Quarantine()
		if !now.Before(q.Until()) || !slices.ContainsFunc(due, func(c reload.Change) bool { return c.ID.String() == e.Source }) {
			continue
		}
		if h.Reason == "" || q.Until().After(h.Until) {
			h.Until = q.Until()
		}
		h.Reason = flap.HoldReason
		held = append(held, fmt.Sprintf("%s quarantined by the flap breaker since %s (%s; last change %s); release: kubectl reloader release %s -n %s",
			e.Source, e.Since.Format(time.RFC3339), strings.Join(e.Seen, ", "), e.Last.Format(time.RFC3339), e.Source, obj.GetNamespace()))
	}
	h.Why = strings.Join(held, "; ")
	return h, h.Reason != ""
}

// keyPatience is how long reconciles wait for the install key before they go ahead without
// the quarantine records it seals: past the loader's own retries of a refused read.
const keyPatience = 3 * time.Minute

// keyWaits remembers since when reconciles have found the install key not loaded.
type keyWaits struct {
	mu    sync.Mutex
	since time.Time
}

// patient reports whether a reconcile that found the key not loaded at now should wait for it.
func (k *keyWaits) patient(now time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.since.IsZero() {
		k.since = now
	}
	return now.Sub(k.since) < keyPatience
}
