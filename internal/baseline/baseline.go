// Package baseline keeps first-sight baselines: for workloads without a record yet, what
// each source was before a change made after reloader first saw it, so that the change
// reloads rather than becomes the record. One Baselines serves every workload kind of a
// manager: one handler per source type hears each source event once.
package baseline

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/cachemem/shrink"
	"github.com/reloader-operator/reloader/internal/clientindex"
	"github.com/reloader-operator/reloader/internal/fair"
	"github.com/reloader-operator/reloader/internal/lookup"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/workload"
)

// Baselines hold, for workloads that have no record yet, the hash each source had before it
// changed, if it changed after reloader first saw it. At start-up every workload waits in the
// queue for its first reconcile, seconds to minutes on a large cluster; a change landing
// meanwhile is a change since reloader saw it, and must reload rather than become the record.
// Only the sources that changed are kept, and only until the workload's record is seen.
//
// They are kept as the cached objects (nil for a source that did not exist), not as hashes:
// a workload may hash only some keys of a source (Rules.KeysOf), and its hash of the object
// is taken when it reconciles. A cached object holds a digest per key, no content.
//
// One Baselines serves every workload kind (New, Watch):
// workload UIDs are unique across kinds, and the sources' handlers are registered once, so
// the memory of handled grows with the sources, not with sources times kinds.
type Baselines struct {
	mu sync.Mutex
	m  map[types.UID]map[source.ID]noted
	// handled is each source's object as of the last event the handlers below processed.
	// An informer updates its store before it tells its handlers, so a reconcile can read a
	// change the handlers have not heard yet; the object here is then the one before it. It
	// is the object the cache holds, or held until the event being handled.
	handled map[handledKey]client.Object
	// recent and creations order a workload's creation against its sources' recent changes
	// (baseline_recent.go).
	recent       map[handledKey][]recentChange
	recentShares *fair.Shares[handledKey]
	creations    map[types.UID]recentCreation
	// recentBytes (recentNSBytes per namespace) and notedBytes are what the recent changes
	// and the noted objects keep (baseline_bytes.go); notedRefs counts the notes of each
	// noted object.
	recentBytes, notedBytes int
	recentNSBytes           map[string]int
	notedRefs               map[client.Object]int
	regs                    []toolscache.ResourceEventHandlerRegistration
	// watchers are the workload kinds whose workloads the sources' handlers note baselines on.
	watchers []Watcher
	// watching holds the source kinds whose handlers are registered: once per kind, whichever
	// reconciler brought it.
	watching map[source.Kind]bool
	// Relisted, when set (--shards), tells whether a source added to the cache came with the
	// list of a shard just taken: it was there before, as those of the first list were. Set
	// it before the manager starts.
	Relisted func(client.Object) bool
}

// New returns the baselines to share among the reconcilers of one manager.
func New() *Baselines { return &Baselines{} }

// Watcher is one workload kind whose workloads without record the baselines note source
// changes on.
type Watcher struct {
	Kind workload.Kind
	// Lookup finds the workloads of Kind that a source change concerns; its Sources are the
	// types Kind reads. Asked at each change, so that a test may swap its client.
	Lookup func() lookup.Lookup
	// Live is true when Kind is read without watch (degraded mode, lookup.Unwatched).
	Live bool
	// unrecordedIn reports whether Kind's cache holds a workload without record in a
	// namespace (Watch sets it from the informer's index; nil: not known, look up).
	unrecordedIn func(ns string) bool
}

// watches reports whether kind is among w's sources.
func (w Watcher) watches(kind source.Kind) bool {
	for _, st := range w.Lookup().Sources {
		if st.Kind == kind {
			return true
		}
	}
	return false
}

// handledKey names a source within its namespace; it reuses the object's own strings, so a
// key costs no allocation of its own.
type handledKey struct {
	namespace string
	id        source.ID
}

func (b *Baselines) setHandled(ns string, id source.ID, o client.Object) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.handled == nil {
		b.handled = map[handledKey]client.Object{}
	}
	b.handled[handledKey{ns, id}] = o
}

func (b *Baselines) forgetHandled(ns string, id source.ID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.handled, handledKey{ns, id})
}

// Synced reports whether the handlers have heard every source of the first list: before
// that, no baseline can be told from the store.
func (b *Baselines) Synced() bool {
	if b == nil {
		return true // no handlers: a reconciler that only plans (explain)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range b.regs {
		if !r.HasSynced() {
			return false
		}
	}
	return true
}

// Of returns the baseline of workload w without record: the hashes of the objects noted by
// the handlers; for a source whose newest change the handlers have not heard yet, the hash of
// the object before it, unless that change is known to precede w's creation; and for a source
// changed after w was created but before w reached the cache, the hash before that change.
// hashOf hashes an object as w observes its source; rv is the resourceVersion of the source's
// cached object.
func (b *Baselines) Of(w client.Object, current map[source.ID]string, hashOf func(source.ID, client.Object) string, rv func(source.ID) string) reload.Record {
	if b == nil {
		return nil
	}
	uid, ns := w.GetUID(), w.GetNamespace()
	b.mu.Lock()
	defer b.mu.Unlock()
	created, ordered := b.createdBy(w)
	now := time.Now()
	var out reload.Record
	for id, hash := range current {
		n, isNoted := b.m[uid][id]
		old := n.old
		if isNoted && b.createdAfter(w, n.rv) {
			isNoted = false // noted on a workload created after the change
		}
		if !isNoted {
			h, heard := b.handled[handledKey{ns, id}]
			var r client.Object
			recent := false
			if ordered {
				r, recent = b.changedAfter(ns, id, created, now)
			}
			switch {
			case heard && hashOf(id, h) != hash:
				if b.createdAfter(w, rv(id)) {
					continue // a change the handlers have not heard, made before w existed
				}
				old = h
			case recent && hashOf(id, r) != hash:
				old = r
			default:
				continue
			}
		}
		if out == nil {
			out = reload.Record{}
		}
		out[id.String()] = hashOf(id, old)
	}
	for id, n := range b.m[uid] {
		if b.createdAfter(w, n.rv) {
			continue
		}
		if out == nil {
			out = reload.Record{}
		}
		if _, ok := out[id.String()]; !ok {
			out[id.String()] = hashOf(id, n.old)
		}
	}
	return out
}

// noted is what a source was before its first change since a workload was seen (old, nil: it
// did not exist), the resourceVersion of that change, and whether the workload may have been
// created after it (its cached copy was newer than the change) and when that was noted.
type noted struct {
	old       client.Object
	rv        string
	ambiguous bool
	at        time.Time
}

// before notes, on workload w, the object a source was before its change at resourceVersion
// rv, its first since w was seen (nil: it did not exist); later changes keep the first.
func (b *Baselines) before(w client.Object, id source.ID, old client.Object, rv string) {
	uid := w.GetUID()
	wrv, okW := revision(w.GetResourceVersion())
	crv, okC := revision(rv)
	n := noted{old: old, rv: rv, ambiguous: !okW || !okC || wrv > crv, at: time.Now()}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[types.UID]map[source.ID]noted{}
	}
	if b.m[uid] == nil {
		b.m[uid] = map[source.ID]noted{}
	}
	if _, ok := b.m[uid][id]; !ok {
		n.old = b.keepNoted(n.old)
		b.m[uid][id] = n
	}
}

// Drop forgets the notes on a workload: its record is seen, or it is gone.
func (b *Baselines) Drop(uid types.UID) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, n := range b.m[uid] {
		b.releaseNoted(n.old)
	}
	shrink.Delete(&b.m, uid)
}

// Watch hears every change of a source from the first list of the informers on, and notes
// its hash before the change on the workloads of w.Kind without record that it concerns. It
// is called before the manager starts, so that no change between cache sync and the first
// reconciles goes unheard. The sources' handlers are registered once per Baselines and note
// on the workloads of every kind that joined it.
func (b *Baselines) Watch(mgr ctrl.Manager, w Watcher) error {
	ctx := context.Background() // informer handlers outlive any caller's context
	var informer cache.Informer
	if !w.Live {
		var err error
		if informer, err = mgr.GetCache().GetInformer(ctx, w.Kind.NewObject()); err != nil {
			return fmt.Errorf("watch %ss for baselines: %w", w.Kind.Name(), err)
		}
		if w.unrecordedIn, err = indexUnrecorded(informer); err != nil {
			return fmt.Errorf("index %ss without record: %w", w.Kind.Name(), err)
		}
	}
	b.mu.Lock()
	b.watchers = append(b.watchers, w)
	var unwatched []sourcecache.SourceType
	for _, st := range w.Lookup().Sources {
		// A pooled source's hash spans many objects; its changes are rare at start-up.
		if st.Pool == nil && !b.watching[st.Kind] {
			if b.watching == nil {
				b.watching = map[source.Kind]bool{}
			}
			b.watching[st.Kind] = true
			unwatched = append(unwatched, st)
		}
	}
	b.mu.Unlock()
	for _, st := range unwatched {
		if err := b.watchSource(ctx, mgr, st); err != nil {
			return err
		}
	}
	if w.Live {
		// No informer to hear deletes: a deleted workload's baselines go when the process
		// does (they are kept only for workloads without record whose sources changed).
		return nil
	}
	_, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if o, ok := obj.(client.Object); ok {
				b.Drop(o.GetUID())
			}
		},
	})
	return err
}

// watchSource registers the handlers of one source type: each event is noted on the workloads
// of every watcher before the source counts as handled, in one handler, so that no reconcile
// sees it handled before its baseline is noted.
func (b *Baselines) watchSource(ctx context.Context, mgr ctrl.Manager, st sourcecache.SourceType) error {
	informer, err := mgr.GetCache().GetInformer(ctx, st.NewObject())
	if err != nil {
		return fmt.Errorf("watch %ss for baselines: %w", st.Kind, err)
	}
	changedFrom := func(o, old client.Object) {
		b.changedRecently(o.GetNamespace(), source.ID{Kind: st.Kind, Name: o.GetName()}, old, o.GetResourceVersion(), time.Now())
		b.mu.Lock()
		watchers := b.watchers
		b.mu.Unlock()
		for _, w := range watchers {
			if w.watches(st.Kind) {
				b.changedFrom(ctx, w, st, o, old)
			}
		}
	}
	reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if o, ok := obj.(client.Object); ok {
				// Not a creation: one of the first list, or of the list of a shard
				// just taken (--shards).
				if !initial && (b.Relisted == nil || !b.Relisted(o)) {
					changedFrom(o, nil)
				}
				b.setHandled(o.GetNamespace(), source.ID{Kind: st.Kind, Name: o.GetName()}, o)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, okOld := oldObj.(client.Object)
			n, okNew := newObj.(client.Object)
			if !okOld || !okNew {
				return
			}
			if st.ContentHash(o) != st.ContentHash(n) {
				changedFrom(n, o)
			}
			b.setHandled(n.GetNamespace(), source.ID{Kind: st.Kind, Name: n.GetName()}, n)
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if o, ok := obj.(client.Object); ok {
				changedFrom(o, o)
				b.forgetHandled(o.GetNamespace(), source.ID{Kind: st.Kind, Name: o.GetName()})
			}
		},
	})
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.regs = append(b.regs, reg)
	b.mu.Unlock()
	return nil
}

// changedFrom notes, on each workload of wt without record that source object o concerns,
// the object the source was before this change (nil: it did not exist).
func (b *Baselines) changedFrom(ctx context.Context, wt Watcher, st sourcecache.SourceType, o, old client.Object) {
	if wt.unrecordedIn != nil && !wt.unrecordedIn(o.GetNamespace()) {
		// Every workload of the kind there has a record, in the cache the lookup reads
		// (whose first list is in): it would find none to note on, and costs a list of
		// the namespace's ReloaderConfigs and two index lists per source event and kind.
		return
	}
	if selected, err := wt.Lookup().NamespaceSelected(ctx, o.GetNamespace()); err != nil || !selected {
		return // a workload there is first seen when its namespace is selected
	}
	id := source.ID{Kind: st.Kind, Name: o.GetName()}
	note := func(w client.Object) {
		if old == nil && wt.Live && !w.GetCreationTimestamp().Time.Before(o.GetCreationTimestamp().Time) {
			// A live list, taken after the event, also shows workloads created since: one
			// created with the source or after it did not see it absent (the times are in
			// whole seconds; within one, the creation counts as part of its first sighting).
			return
		}
		b.before(w, id, old, o.GetResourceVersion())
	}
	// A live lookup (degraded mode) can fail; it is made again here, on this handler's own
	// goroutine, before the workloads' reconciles (queued by a lookup of their own, retried
	// from a second on: liveretry.go) would take the new content as their first. A note
	// made twice keeps the first.
	if wt.Live {
		// The lookup sees at least this change's cluster, and a hung API server holds the
		// handler for noteDeadline at most.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(clientindex.AtLeast(ctx, o.GetResourceVersion()), noteDeadline)
		defer cancel()
	}
	for delay := noteRetryFirst; ; delay *= 2 {
		_, failed := wt.Lookup().FindAffectedOf(ctx, wt.Kind, o.GetNamespace(), id, o.GetAnnotations(), o.GetLabels(), unrecorded, note)
		if failed == nil || delay > noteRetryLast {
			return
		}
		time.Sleep(delay)
	}
}

// unrecorded reports whether w has no record: only such a workload is noted a baseline.
func unrecorded(w client.Object) bool {
	_, recorded := w.GetAnnotations()[reload.RecordAnnotation]
	return !recorded
}

// A failed live lookup of the workloads to note a change on is made again after 100, 200 and
// 400 ms, all within noteDeadline.
const (
	noteRetryFirst, noteRetryLast = 100 * time.Millisecond, 400 * time.Millisecond
	noteDeadline                  = 5 * time.Second
)

// HashAs hashes a source object noted in a baseline as a workload observes the source now
// (its sources, read with types): restricted to the same keys.
func HashAs(types []sourcecache.SourceType, sources map[source.ID]sourcecache.Observed) func(source.ID, client.Object) string {
	return func(id source.ID, o client.Object) string {
		for _, st := range types {
			if st.Kind == id.Kind {
				seen := sources[id]
				return st.HashOf(o, seen.Keys, seen.Restricted)
			}
		}
		return reload.Absent
	}
}
