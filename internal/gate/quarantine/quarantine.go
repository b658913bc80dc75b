// Package quarantine is the flap breaker's gate (internal/flap decides): a due reload whose
// changes come from a source in quarantine is held until the latest of their ends.
//
// Each source event feeds its content change, with its writer, to the shared flap.Table
// (Observe, once per source event); the gate reads the table where a reload is decided, and
// keeps the quarantines that hold a target on the target itself.
//
// Where the state lives: on each target it holds, in flap.RecordAnnotation, under a MAC of the
// install key (as Job replacement records are). A restart reads it back, so a flap that began
// before it stays held. Not on the source: a source's annotations are the tenant's input,
// reloader may not write sources at all, and a record there could be forged or removed to
// release a flap. Not in one reloader-owned object: every replica and shard would contend on
// it, and it would grow with every source of the cluster. A tenant who may write the target
// can delete the record, which releases only that target's hold, which they could roll
// anyway; they can't forge one. Without a valid install key (a run outside a namespace of
// reloader's own) the quarantines live in memory only.
package quarantine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/reloader-operator/reloader/internal/alert"
	"github.com/reloader-operator/reloader/internal/flap"
	"github.com/reloader-operator/reloader/internal/gate"
	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/termsafe"
	"github.com/reloader-operator/reloader/internal/whatchanged"
)

// Name is the gate's name in holds, metrics and explain.
const Name = "quarantine"

// Event reasons of the flap breaker.
const (
	ReasonSourceQuarantined  = "SourceQuarantined"
	ReasonQuarantineReleased = "QuarantineReleased"
)

// KeyPatience is how long reconciles wait for the install key before they go ahead without
// the quarantine records it seals: past the loader's own retries of a refused read.
const KeyPatience = 3 * time.Minute

// Config is what the gate is built from.
type Config struct {
	// Table is the flap breaker's table, shared by every target kind (a source flaps whatever
	// kind uses it); nil: --flap-max-changes=0, nothing is held (a DryRun still reads the
	// records targets keep).
	Table *flap.Table
	// Key is the install key that seals the records; nil, or a key that is not Valid: the
	// quarantines are kept in memory only. An error: the key has not loaded yet.
	Key func(ctx context.Context) (hash.Key, error)
	// Held is reloader_reloads_held_total (by reason); nil counts nothing.
	Held *prometheus.CounterVec
}

// Gate is the flap breaker's hold.
type Gate struct {
	c Config
	// keyWaits: since when Checks have found the install key not loaded.
	mu       sync.Mutex
	keySince time.Time
}

// New returns the gate.
func New(c Config) *Gate { return &Gate{c: c} }

// Name implements gate.Gate.
func (g *Gate) Name() string { return Name }

// Check holds the due changes of sources in quarantine, until the latest of their ends; it
// honours a source's release annotation, takes over the quarantines recorded on the target
// (after a restart), and keeps the record of those that hold its sources now (Annotate).
func (g *Gate) Check(ctx context.Context, d gate.Due) (gate.Verdict, error) {
	var v gate.Verdict
	if g.c.Table == nil {
		if d.DryRun {
			v.Hold = recorded(d)
		}
		return v, nil
	}
	if !d.DryRun {
		if err := g.adopt(ctx, d); err != nil {
			return v, err
		}
	}
	var held []string
	for _, ch := range d.Changes {
		key := flap.Key{Namespace: d.Target.GetNamespace(), Kind: string(ch.ID.Kind), Name: ch.ID.Name}
		released := time.Time{}
		if s := d.Sources[ch.ID]; s.Object != nil {
			_, bad := flap.ParseLimits(s.Annotations, g.c.Table.Defaults())
			v.Invalid = append(v.Invalid, bad...)
			released = g.release(ctx, d, &v, key, ch.ID, s.Annotations)
		}
		q, ok := g.c.Table.Status(key, d.Now)
		if ok && d.DryRun && !released.IsZero() && flap.Releases(released, q.Since) {
			ok = false // as the release would end it
		}
		if !ok {
			continue
		}
		if v.Hold.Reason == "" || q.Until().After(v.Hold.Until) {
			v.Hold.Until = q.Until()
		}
		v.Hold.Reason = flap.HoldReason
		held = append(held, fmt.Sprintf("%s quarantined by the flap breaker since %s (%s); release: kubectl reloader release %s -n %s",
			sourceName(ch.ID), q.Since.UTC().Format(time.RFC3339), q.What(), ch.ID, d.Target.GetNamespace()))
	}
	if v.Hold.Reason == "" && d.DryRun {
		v.Hold = recorded(d)
	}
	if v.Hold.Reason != "" && len(held) > 0 {
		v.Hold.Why = strings.Join(held, "; ")
		v.Notices = append(v.Notices, g.notice(d, v.Hold))
	}
	if !d.DryRun {
		v.Annotate = g.keep(ctx, d)
	}
	return v, nil
}

// release ends the quarantine of a source whose release annotation names a time at or after
// its start (a DryRun only reads it: the time, to judge as the release would); a bad or
// future one is reported.
func (g *Gate) release(ctx context.Context, d gate.Due, v *gate.Verdict, key flap.Key, id source.ID, ann map[string]string) time.Time {
	s, ok := ann[flap.ReleaseAnnotation]
	if !ok {
		return time.Time{}
	}
	at, err := flap.ParseRelease(s, d.Now)
	if err != nil {
		v.Invalid = append(v.Invalid, err)
		return time.Time{}
	}
	if d.DryRun {
		return at
	}
	if g.c.Table.Release(key, at, d.Now) {
		log.FromContext(ctx).Info("quarantine released", "source", id.String(), "release", at.UTC().Format(time.RFC3339))
		v.Notices = append(v.Notices, gate.Notice{Reason: ReasonQuarantineReleased, Action: "Release",
			Message: fmt.Sprintf("Quarantine of %s released by its %s annotation (%s); reloading on its latest content", sourceName(id), flap.ReleaseAnnotation, at.UTC().Format(time.RFC3339))})
	}
	return at
}

// notice tells of a quarantine hold, once per set of quarantines (their sources and starts,
// not the counts that move): a Warning Event that says what was seen and who wrote it, an
// alert, the held counter.
func (g *Gate) notice(d gate.Due, h reload.Hold) gate.Notice {
	n := gate.Notice{Warning: true, Reason: ReasonSourceQuarantined, Action: "Hold", Once: signature(h.Why),
		Message: termsafe.ClipNote(fmt.Sprintf("Reloads of %s %s after changes of %s held: %s; reloads once quiet, at %s at the earliest",
			d.Kind, d.Target.GetName(), describe(d.Changes), h.Why, h.Until.UTC().Format(time.RFC3339))),
		Alert: &alert.Reload{Kind: d.Kind, Namespace: d.Target.GetNamespace(), Name: d.Target.GetName(),
			Sources: alert.SourcesOf(d.Changes), Time: d.Now, Held: h.Why}}
	if g.c.Held != nil {
		n.Count = []prometheus.Counter{g.c.Held.WithLabelValues(h.Reason)}
	}
	return n
}

// signature keeps, of a hold's description, each source and its start.
func signature(why string) string {
	var sig []string
	for part := range strings.SplitSeq(why, "; ") {
		if head, _, ok := strings.Cut(part, " ("); ok && strings.Contains(head, " since ") {
			sig = append(sig, head)
		}
	}
	return strings.Join(sig, "|")
}

func describe(changes []reload.Change) string { return alert.Describe(alert.SourcesOf(changes)) }

// sourceName is "Secret creds".
func sourceName(id source.ID) string { return id.Kind.Title() + " " + id.Name }

// subject names the target for the MAC of its quarantine record.
func subject(d gate.Due) flap.Subject {
	return flap.Subject{Kind: d.Kind, Namespace: d.Target.GetNamespace(), Name: d.Target.GetName(), UID: string(d.Target.GetUID())}
}

// key is the install key; not Valid when there is none.
func (g *Gate) key(ctx context.Context) (hash.Key, error) {
	if g.c.Key == nil {
		return hash.Key{}, nil
	}
	return g.c.Key(ctx)
}

// adopt takes over the quarantines recorded on the target, when the record is reloader's (its
// MAC is valid for this target); another is logged and ignored. An error when the install key
// has not loaded yet (just after a restart, on a busy API server): the reconcile is retried
// rather than going ahead as if the record were not there; for KeyPatience at most (a key
// that never loads must not hold reloads for good).
func (g *Gate) adopt(ctx context.Context, d gate.Due) error {
	v, ok := d.Target.GetAnnotations()[flap.RecordAnnotation]
	if !ok {
		return nil
	}
	key, err := g.key(ctx)
	if err != nil {
		if g.patient(d.Now) {
			return fmt.Errorf("read the quarantine record: %w", err)
		}
		log.FromContext(ctx).Error(err, "the install key has not loaded for minutes: the quarantine record on this workload is not read, its reloads go ahead")
		return nil
	}
	if !key.Valid() {
		return nil
	}
	entries, err := flap.Open(key, subject(d), v)
	if err != nil {
		log.FromContext(ctx).Info("ignoring quarantine record", "annotation", flap.RecordAnnotation, "error", err.Error())
		return nil
	}
	for _, e := range entries {
		if id, ok := source.ParseID(e.Source); ok {
			g.c.Table.Adopt(flap.Key{Namespace: d.Target.GetNamespace(), Kind: string(id.Kind), Name: id.Name}, e.Quarantine(), d.Now)
		}
	}
	return nil
}

// patient reports whether a Check that found the key not loaded at now should wait for it.
func (g *Gate) patient(now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.keySince.IsZero() {
		g.keySince = now
	}
	return now.Sub(g.keySince) < KeyPatience
}

// keep is the record of the quarantines that hold the target's sources now, to write on it,
// or its removal when none does; nil when the target has it already.
func (g *Gate) keep(ctx context.Context, d gate.Due) map[string]*string {
	var entries []flap.Entry
	for id := range d.Sources {
		if q, ok := g.c.Table.Status(flap.Key{Namespace: d.Target.GetNamespace(), Kind: string(id.Kind), Name: id.Name}, d.Now); ok {
			entries = append(entries, flap.FromQuarantine(id.String(), q))
		}
	}
	cur, had := d.Target.GetAnnotations()[flap.RecordAnnotation]
	if len(entries) == 0 {
		if had {
			return map[string]*string{flap.RecordAnnotation: nil}
		}
		return nil
	}
	key, err := g.key(ctx)
	if err != nil || !key.Valid() {
		return nil
	}
	slices.SortFunc(entries, func(a, b flap.Entry) int { return b.Last.Compare(a.Last) })
	entries = entries[:min(len(entries), flap.MaxEntries)]
	if v := flap.Seal(key, subject(d), entries); cur != v {
		return map[string]*string{flap.RecordAnnotation: &v}
	}
	return nil
}

// recorded is, for a DryRun without the breaker's table (explain: the controller's memory is
// not there), the quarantine recorded on the target that holds a due change, as read
// without its key.
func recorded(d gate.Due) reload.Hold {
	entries, err := flap.Peek(d.Target.GetAnnotations()[flap.RecordAnnotation])
	if err != nil {
		return reload.Hold{}
	}
	var h reload.Hold
	var held []string
	for _, e := range entries {
		q := e.Quarantine()
		if !d.Now.Before(q.Until()) || !slices.ContainsFunc(d.Changes, func(c reload.Change) bool { return c.ID.String() == e.Source }) {
			continue
		}
		if h.Reason == "" || q.Until().After(h.Until) {
			h.Until = q.Until()
		}
		h.Reason = flap.HoldReason
		held = append(held, fmt.Sprintf("%s quarantined by the flap breaker since %s (%s; last change %s); release: kubectl reloader release %s -n %s",
			e.Source, e.Since.Format(time.RFC3339), strings.Join(e.Seen, ", "), e.Last.Format(time.RFC3339), e.Source, d.Target.GetNamespace()))
	}
	h.Why = strings.Join(held, "; ")
	return h
}

// Observe feeds one content change of a source (from and to its content hashes, written by
// wr) to the table: called once per source event, whatever kinds use the source.
func Observe(t *flap.Table, kind source.Kind, cur client.Object, from, to string, wr whatchanged.Writer, now time.Time) {
	if t == nil || from == to || from == "" || to == "" {
		return
	}
	t.Observe(flap.Key{Namespace: cur.GetNamespace(), Kind: string(kind), Name: cur.GetName()},
		flap.Change{At: now, Version: cur.GetResourceVersion(), From: from, To: to, Writer: wr}, cur.GetAnnotations())
}

// Gone drops a deleted source from the table.
func Gone(t *flap.Table, kind source.Kind, obj client.Object) {
	t.Forget(flap.Key{Namespace: obj.GetNamespace(), Kind: string(kind), Name: obj.GetName()})
}
