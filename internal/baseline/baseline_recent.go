package baseline

import (
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/reloader-operator/reloader/internal/fair"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
)

// A workload created moments before a change of its source can reach the cache after the
// handlers heard the change (each kind has its own watch), so they could not note it on the
// workload, and its first reconcile would take the new content as what it started with. For
// a short while after each change, the source's content before it is kept here with the
// change's resourceVersion, and a workload without record created before the change compares
// with that content instead, as a workload seen before the change would.
//
// "Before" is told by resourceVersions, not creation times (whole seconds, too coarse: a
// workload re-created just after a change must not roll). They are etcd's revisions, one
// sequence across kinds; a value that is not a number is not compared, and the change is then
// taken as the first sighting, as without this. The workload's creation is bounded from above
// by the resourceVersion of its first ADD event and of its cached copy, so a workload created
// after the change is never taken as created before it.
const (
	recentWindow = 30 * time.Second
	// Bounds: changes kept per source, sources with changes kept, workload creations kept.
	recentPerSource = 4
	recentSources   = 4096
	// recentShare: one namespace keeps the changes of at most 1/recentShare of recentSources.
	recentShare     = 4
	recentCreations = 16384
)

type recentChange struct {
	at  time.Time
	rv  uint64
	old client.Object
}

type recentCreation struct {
	at time.Time
	rv uint64
}

// changedRecently keeps what a source was before its change at resourceVersion rv, heard at now.
func (b *Baselines) changedRecently(ns string, id source.ID, old client.Object, rv string, now time.Time) {
	v, ok := revision(rv)
	if !ok {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.recent == nil {
		b.recent = map[handledKey][]recentChange{}
		b.recentShares = fair.NewShares[handledKey](recentSources, recentSources/recentShare)
	}
	k := handledKey{ns, id}
	size := retainedSize(old)
	if !b.roomForRecent(ns, size, now) {
		return // this namespace's sources hold the most bytes: only their watch-time baselines
	}
	if _, ok := b.recent[k]; !ok {
		if _, crowded := b.recentShares.Crowded(ns); crowded {
			b.expireRecent(now)
		}
		if victim, crowded := b.recentShares.Crowded(ns); crowded {
			if victim == ns {
				return // a burst across thousands of this namespace's sources: only their watch-time baselines
			}
			// Another namespace holds more: its oldest change makes room, so that its burst
			// never costs this namespace its own.
			b.dropOldestRecent(victim)
		}
		b.recentShares.Add(ns, k)
	}
	changes := append(b.recent[k], recentChange{at: now, rv: v, old: old})
	b.countRecent(ns, size)
	if len(changes) > recentPerSource {
		for _, c := range changes[:len(changes)-recentPerSource] {
			b.countRecent(ns, -retainedSize(c.old))
		}
		changes = slices.Clone(changes[len(changes)-recentPerSource:])
	}
	b.recent[k] = changes
}

// roomForRecent makes room for size more bytes of recent changes of namespace ns, within
// recentMaxBytes: the expired changes go first, then the oldest of the namespace that holds
// the most bytes, unless that is ns. Called with b.mu held.
func (b *Baselines) roomForRecent(ns string, size int, now time.Time) bool {
	if b.recentBytes+size <= recentMaxBytes {
		return true
	}
	b.expireRecent(now)
	for b.recentBytes+size > recentMaxBytes {
		victim, most := "", 0
		for other, n := range b.recentNSBytes {
			if n > most {
				victim, most = other, n
			}
		}
		if victim == "" || victim == ns {
			return false
		}
		b.dropOldestRecent(victim)
	}
	return true
}

// countRecent adds n bytes (negative: takes) to what namespace ns's recent changes hold.
// Called with b.mu held.
func (b *Baselines) countRecent(ns string, n int) {
	if b.recentNSBytes == nil {
		b.recentNSBytes = map[string]int{}
	}
	b.recentBytes += n
	if b.recentNSBytes[ns] += n; b.recentNSBytes[ns] <= 0 {
		delete(b.recentNSBytes, ns)
	}
}

// created keeps the resourceVersion of a workload's ADD event after the first list: the
// resourceVersion of its creation.
func (b *Baselines) created(uid types.UID, rv string, now time.Time) {
	v, ok := revision(rv)
	if !ok {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.creations == nil {
		b.creations = map[types.UID]recentCreation{}
	}
	if len(b.creations) >= recentCreations {
		b.expireCreations(now)
		if len(b.creations) >= recentCreations {
			return
		}
	}
	if _, seen := b.creations[uid]; !seen {
		b.creations[uid] = recentCreation{at: now, rv: v}
	}
}

// createdBy returns a resourceVersion no earlier than the workload's creation: the lower of
// its first ADD event's and its cached copy's. Called with b.mu held.
func (b *Baselines) createdBy(w client.Object) (uint64, bool) {
	rv, ok := revision(w.GetResourceVersion())
	if c, added := b.creations[w.GetUID()]; added && (!ok || c.rv < rv) {
		rv, ok = c.rv, true
	}
	return rv, ok
}

// createdAfter reports whether workload w was created after the source's resourceVersion rv:
// known only from w's ADD event (its creation's resourceVersion). Called with b.mu held.
func (b *Baselines) createdAfter(w client.Object, rv string) bool {
	c, added := b.creations[w.GetUID()]
	v, ok := revision(rv)
	return added && ok && v < c.rv
}

// NotingCreations is the predicate of a workload controller's own watch that keeps the
// resourceVersion of each workload created while reloader runs: evaluated before the
// workload is queued, so its first reconcile always finds it. Not the workloads of the first
// list, nor of the list of a shard just taken (their resourceVersion is of a later write).
func (b *Baselines) NotingCreations() predicate.Predicate {
	return predicate.Funcs{CreateFunc: func(e event.CreateEvent) bool {
		if !e.IsInInitialList && (b.Relisted == nil || !b.Relisted(e.Object)) {
			b.created(e.Object.GetUID(), e.Object.GetResourceVersion(), time.Now())
		}
		return true
	}}
}

// changedAfter returns what the source was before its earliest recent change made after
// resourceVersion created. Called with b.mu held.
func (b *Baselines) changedAfter(ns string, id source.ID, created uint64, now time.Time) (client.Object, bool) {
	for _, c := range b.recent[handledKey{ns, id}] {
		if now.Sub(c.at) <= recentWindow && c.rv > created {
			return c.old, true
		}
	}
	return nil, false
}

// expireRecent drops the changes older than the window. Called with b.mu held.
func (b *Baselines) expireRecent(now time.Time) {
	for k, changes := range b.recent {
		for len(changes) > 0 && now.Sub(changes[0].at) > recentWindow {
			b.countRecent(k.namespace, -retainedSize(changes[0].old))
			changes[0].old = nil // the array outlives the slice
			changes = changes[1:]
		}
		if len(changes) == 0 {
			delete(b.recent, k)
			b.recentShares.Remove(k.namespace, k)
		} else {
			b.recent[k] = changes
		}
	}
}

// dropOldestRecent drops, of namespace ns's sources, the one whose latest change is oldest.
// Called with b.mu held.
func (b *Baselines) dropOldestRecent(ns string) {
	var oldest handledKey
	var at time.Time
	found := false
	for k := range b.recentShares.Keys(ns) {
		changes := b.recent[k]
		if last := changes[len(changes)-1].at; !found || last.Before(at) {
			oldest, at, found = k, last, true
		}
	}
	if found {
		for _, c := range b.recent[oldest] {
			b.countRecent(ns, -retainedSize(c.old))
		}
		delete(b.recent, oldest)
		b.recentShares.Remove(ns, oldest)
	}
}

// expireCreations drops the creations older than the window. Called with b.mu held.
func (b *Baselines) expireCreations(now time.Time) {
	for uid, c := range b.creations {
		if now.Sub(c.at) > recentWindow {
			delete(b.creations, uid)
		}
	}
}

func revision(rv string) (uint64, bool) {
	v, err := strconv.ParseUint(rv, 10, 64)
	return v, err == nil && v > 0
}

// orderWait is how long a workload's first reconcile waits for its own ADD event when a change
// noted on it may predate its creation. A workload of the first list has none that counts: it
// is then taken as created before the change.
const orderWait = 2 * time.Second

// Heard reports whether the handlers have heard every source of workload w at the version the
// cache holds, w's creation when a change noted on it may predate it, and, for a workload
// created moments ago, a source absent from the cache. A workload's first
// reconcile can read a source the handlers have not heard at all yet (created, then changed,
// moments ago): neither the content before the change nor the change's order against the
// workload's creation is known then; and a source's handler can note a change on a workload
// before the workload's own ADD event is handled. Both catch up within moments. Pooled
// sources have no handlers. A workload read live (degraded mode) has no ADD event to wait
// for, but its sources' handlers are awaited all the same: each notes a change with a LIST
// of its own, and under load they fall behind the lookups that queue the reconciles.
func (b *Baselines) Heard(w client.Object, sources map[source.ID]sourcecache.Observed, live bool) bool {
	if b == nil {
		return true
	}
	ns := w.GetNamespace()
	b.mu.Lock()
	defer b.mu.Unlock()
	c, added := b.creations[w.GetUID()]
	if !added && !live {
		for _, n := range b.m[w.GetUID()] {
			if n.ambiguous && time.Since(n.at) < orderWait {
				return false
			}
		}
	}
	for id, o := range sources {
		if !b.watching[id.Kind] {
			continue
		}
		if o.Object() == nil {
			// Absent from the cache: for a workload created moments ago, the source's
			// informer may not have caught up with its creation yet.
			if added && time.Since(c.at) < orderWait {
				return false
			}
			continue
		}
		h, ok := b.handled[handledKey{ns, id}]
		if !ok || h.GetResourceVersion() != o.Object().GetResourceVersion() {
			return false
		}
	}
	return true
}
