package shard

import (
	"context"
	"maps"
	"reflect"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// noNamespace is a field selector no object matches ("-" is no namespace name): the request
// of a replica that owns no namespace, since an empty shardSelector means everything.
const noNamespace = "metadata.namespace=-"

// MaxServerRanges bounds the namespaces named in one shardSelector (the API server parses it
// as CEL, of at most 100,000 characters): a replica that owns more is sent everything and
// filters on arrival.
const MaxServerRanges = 1000

// Filter holds the shards this replica owns and makes the cache's informers list and watch
// only their namespaces: it asks the API server for them (a shardSelector naming the raw hash
// of each owned namespace) and drops whatever else arrives, so the cache holds only the slice
// whether or not the server applied the selector. When the shards owned change, or a
// namespace appears in one, every watch it serves splices the change into its stream (see
// stream): the objects of the namespaces gained, listed at the stream's resourceVersion, come
// as adds, those of the shards given up as deletes, and the watch goes on under the new
// selector. The informers never list again for a hand-over, so client-go's relist backoff
// (0.8 s doubling to 30 s) never delays a shard taken.
type Filter struct {
	space      Space
	serverSide bool

	mu    sync.Mutex
	owned map[int]bool
	// namespaces are the namespaces known, with their shard.
	namespaces map[string]int
	req        request
	// mine are the owned namespaces req names (none when it asks for everything or nothing).
	mine []string
	// moved is closed, and replaced, whenever the request widens or narrows; gen counts
	// those changes.
	moved chan struct{}
	gen   uint64
	// acquired is, per owned shard, the gen from which the informers' lists hold it.
	acquired map[int]uint64
	// listed is, per wrapped informer, the gen of its last complete list.
	listed []uint64
	// took is, per wrapped informer, the resourceVersion of its first complete list of each
	// owned shard: what came with that list was there before, not created (Relisted).
	took      []took
	informers []counted
}

// took is one informer's kind and the resourceVersion of its first list of each owned shard,
// and its store (the objects of shards given up leave it as deletes).
type took struct {
	kind  string
	rv    map[int]string
	store toolscache.Store
}

// request is what lists and watches ask the API server for.
type request struct {
	// nothing: no namespace is owned.
	nothing bool
	// selector names the owned namespaces; "" with nothing false asks for everything.
	selector string
}

// counted is one informer of the cache, with the kind it holds.
type counted struct {
	kind     string
	informer toolscache.SharedIndexInformer
}

// NewFilter returns a filter that owns no shard yet.
// serverSide says whether the API server applies shard selectors (Detect).
func NewFilter(s Space, serverSide bool) *Filter {
	return &Filter{space: s, serverSide: serverSide, owned: map[int]bool{}, namespaces: map[string]int{}, req: request{nothing: true},
		moved: make(chan struct{}), acquired: map[int]uint64{}}
}

// Owns reports whether namespace belongs to an owned shard: reconcilers check it, so that a
// shard being handed over is left alone before its objects leave the cache.
func (f *Filter) Owns(namespace string) bool {
	own, _ := f.Ready(namespace)
	return own
}

// Ready reports whether namespace belongs to an owned shard and whether every informer has
// listed it since: the kinds relist one by one, and a workload reconciled before its sources
// arrived would take them for new ones and record them instead of rolling out a change.
func (f *Filter) Ready(namespace string) (own, ready bool) {
	i := f.space.Of(namespace)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.owned[i] {
		return false, false
	}
	for _, g := range f.listed {
		if g < f.acquired[i] {
			return true, false
		}
	}
	return true, true
}

// Owned returns the owned shards, sorted.
func (f *Filter) Owned() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.owned))
}

// Add and Remove change the owned shards.
func (f *Filter) Add(i int)    { f.setShard(i, true) }
func (f *Filter) Remove(i int) { f.setShard(i, false) }

func (f *Filter) setShard(i int, own bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if own == f.owned[i] {
		return
	}
	if own {
		f.owned[i] = true
	} else {
		delete(f.owned, i)
		delete(f.acquired, i)
		for _, t := range f.took {
			delete(t.rv, i)
		}
	}
	// Always listed again, even when the request stays the same (everything, past
	// MaxServerRanges): what was dropped on arrival must be listed, what leaves must go.
	f.update(true, true)
	if own {
		f.acquired[i] = f.gen
	}
}

// NamespaceAdded and NamespaceDeleted keep the namespaces known. A deleted namespace ends no
// watch: its objects are gone, and the next list leaves it out.
func (f *Filter) NamespaceAdded(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.namespaces[name] = f.space.Of(name)
	// Only a server that applies the selector must be asked again; otherwise the new
	// namespace's objects arrive anyway and pass the filter.
	f.update(f.serverSide, false)
}

func (f *Filter) NamespaceDeleted(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.namespaces, name)
	f.update(false, false)
}

// update recomputes the request; when it changed (or force) and relist is set, the
// informers list again. Called with f.mu held.
func (f *Filter) update(relist, force bool) {
	var mine []string
	for ns, i := range f.namespaces {
		if f.owned[i] {
			mine = append(mine, ns)
		}
	}
	var req request
	switch {
	case len(mine) == 0:
		req.nothing = true
	case len(mine) <= MaxServerRanges:
		req.selector = Selector(mine).String()
	default:
		mine = nil
	}
	if req == f.req && !force {
		return
	}
	f.req, f.mine = req, mine
	if relist {
		close(f.moved)
		f.moved = make(chan struct{})
		f.gen++
	}
}

// view is what one list or watch asks for and passes on: the request, the owned shards and
// namespaces it was made for, the channel closed when it goes stale, and its gen.
type view struct {
	req   request
	owned map[int]bool
	mine  map[string]bool
	moved <-chan struct{}
	gen   uint64
}

// snapshot returns the view of now.
func (f *Filter) snapshot() view {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := view{req: f.req, owned: maps.Clone(f.owned), mine: make(map[string]bool, len(f.mine)), moved: f.moved, gen: f.gen}
	for _, ns := range f.mine {
		v.mine[ns] = true
	}
	return v
}

// delivers reports whether a list or watch made for v brings namespace's objects.
func (f *Filter) delivers(v view, namespace string) bool {
	switch {
	case !v.owned[f.space.Of(namespace)] || v.req.nothing:
		return false
	case !f.serverSide || v.req.selector == "":
		return true // the server sends everything; the owned shards pass
	default:
		return v.mine[namespace]
	}
}

// keeps reports whether obj belongs to the shards v owns.
func (f *Filter) keeps(v view, obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	if err != nil {
		return true // not an object with metadata: nothing to filter on
	}
	return v.owned[f.space.Of(m.GetNamespace())]
}

// markListed notes that informer k has a complete list of gen g, at resourceVersion rv, that
// brought objs. Its shards count as listed (Ready) only once the informer's store holds objs:
// an informer takes what it lists or watches into its store through a queue, and a loaded
// process lags, so a workload reconciled earlier could find its sources missing.
func (f *Filter) markListed(k int, g uint64, rv string, objs []stored) {
	f.mu.Lock()
	for i := range f.owned {
		if _, ok := f.took[k].rv[i]; !ok && f.acquired[i] <= g {
			f.took[k].rv[i] = rv
		}
	}
	store := f.took[k].store
	f.mu.Unlock()
	if store == nil || len(objs) == 0 {
		f.promote(k, g)
		return
	}
	go func() {
		waitStored(store, objs, storeWait)
		f.promote(k, g)
	}()
}

// promote counts informer k's list of gen g as in its store.
func (f *Filter) promote(k int, g uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listed[k] = max(f.listed[k], g)
}

// storeWait bounds the wait for a store to take in a list: an object deleted meanwhile never
// arrives.
const storeWait = 5 * time.Second

// stored is an object a list brought, by store key and resourceVersion.
type stored struct{ key, rv string }

func storedOf(objs []runtime.Object) []stored {
	out := make([]stored, 0, len(objs))
	for _, o := range objs {
		m, err := meta.Accessor(o)
		if err != nil {
			continue
		}
		if key, err := toolscache.MetaNamespaceKeyFunc(o); err == nil {
			out = append(out, stored{key, m.GetResourceVersion()})
		}
	}
	return out
}

// waitStored returns once store holds each of objs at its resourceVersion or later, or after
// limit.
func waitStored(store toolscache.Store, objs []stored, limit time.Duration) {
	deadline := time.Now().Add(limit)
	pause := 10 * time.Millisecond
	for {
		left := objs[:0]
		for _, o := range objs {
			if !holds(store, o) {
				left = append(left, o)
			}
		}
		objs = left
		if len(objs) == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
	}
}

func holds(store toolscache.Store, o stored) bool {
	got, ok, err := store.GetByKey(o.key)
	if err != nil || !ok {
		return false
	}
	m, err := meta.Accessor(got)
	if err != nil {
		return true
	}
	c, err := resourceversion.CompareResourceVersion(m.GetResourceVersion(), o.rv)
	return err != nil || c >= 0
}

// Relisted reports whether obj, just added to the cache, came with the list of a shard this
// replica took rather than as a creation: the informer has not listed the shard yet, or
// listed it at obj's resourceVersion or later. Those objects were there before, as those
// of the first list are, though the informer does not call them initial. (The informer
// hands the list's objects to its handlers after the list returned, so whether the shard
// is listed yet does not tell alone.) Objects whose resourceVersions do not compare (no
// etcd behind the server) count as created. An object of a shard no longer owned (given up,
// or dropped when its Lease could not be renewed, between the list that brought it and its
// handlers) is no creation of this replica's: it acts on none of that shard's objects, and
// the replica that takes the shard lists it.
func (f *Filter) Relisted(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	i, kind := f.space.Of(m.GetNamespace()), kindOf(obj)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.owned[i] {
		return true
	}
	for _, t := range f.took {
		if t.kind != kind {
			continue
		}
		rv, listed := t.rv[i]
		if !listed {
			return true
		}
		if c, err := resourceversion.CompareResourceVersion(m.GetResourceVersion(), rv); err == nil && c <= 0 {
			return true
		}
	}
	return false
}

// Cached counts the objects in the cache by kind.
func (f *Filter) Cached() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for _, c := range f.informers {
		out[c.kind] += len(c.informer.GetStore().ListKeys())
	}
	return out
}

// NewInformer is controller-runtime's cache.Options.NewInformer: the informers of namespaced
// kinds see only the owned shards. Namespaces themselves are cluster-scoped and seen whole.
func (f *Filter) NewInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	kind := kindOf(obj)
	k := -1
	if kind != "Namespace" {
		f.mu.Lock()
		k = len(f.listed)
		f.listed = append(f.listed, 0)
		f.took = append(f.took, took{kind: kind, rv: map[int]string{}})
		f.mu.Unlock()
		lw = f.wrap(lw, k, obj)
	}
	inf := toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
	f.mu.Lock()
	f.informers = append(f.informers, counted{kind: kind, informer: inf})
	if k >= 0 {
		f.took[k].store = inf.GetStore()
	}
	f.mu.Unlock()
	return inf
}

func kindOf(obj runtime.Object) string {
	if _, ok := obj.(*corev1.Namespace); ok {
		return "Namespace"
	}
	if k := obj.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k // unstructured and metadata-only objects carry theirs
	}
	return reflect.TypeOf(obj).Elem().Name()
}

// wrap adds the shard selector to the lists and watches of informer k, filters their results,
// notes each complete list, and splices hand-overs into its watches (stream).
func (f *Filter) wrap(lw toolscache.ListerWatcher, k int, exemplar runtime.Object) toolscache.ListerWatcher {
	inner := toolscache.ToListerWatcherWithContext(lw)
	st := &listState{}
	return &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			v := f.snapshot()
			if opts.Continue != "" {
				// A later page: under the request of the first, or the list starts again.
				var ok bool
				if v, ok = st.page(v.gen); !ok {
					return nil, apierrors.NewResourceExpired("the shards this replica owns changed during a paged list; list again")
				}
			} else {
				st.begin(v)
			}
			ask(&opts, v.req)
			list, err := inner.ListWithContext(ctx, opts)
			if err != nil {
				return nil, err
			}
			kept, err := f.keepInList(list, v)
			if err != nil {
				return nil, err
			}
			st.brought(kept)
			if m, err := meta.ListAccessor(list); err == nil && m.GetContinue() == "" {
				cur, objs := st.complete()
				f.markListed(k, cur.gen, m.GetResourceVersion(), objs)
			}
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			watchList := opts.SendInitialEvents != nil && *opts.SendInitialEvents
			v := f.snapshot()
			if !watchList {
				// The watch goes on from the store as last listed or spliced: if the request
				// changed since, the stream splices the change in at once.
				v = st.lastListed(v)
			}
			base := opts
			ask(&opts, v.req)
			w, err := inner.WatchWithContext(ctx, opts)
			if err != nil {
				return nil, err
			}
			s := &stream{f: f, k: k, inner: inner, ctx: ctx, base: base, st: st, exemplar: exemplar,
				upstream: w, view: v, watchList: watchList}
			if !watchList && opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
				s.at = opts.ResourceVersion // from a known point: no synthetic adds to wait out
			}
			return s.start(), nil
		},
	}
}

// listState is the view one informer's list was made under, page by page, and the view its
// store is complete for.
type listState struct {
	mu sync.Mutex
	// The list under way, and what its pages brought so far.
	cur  view
	objs []stored
	// The last complete list, or watch list, or splice.
	listed view
}

func (s *listState) begin(v view) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur, s.objs = v, nil
}

// brought notes the objects of a page of the list under way.
func (s *listState) brought(items []runtime.Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objs = append(s.objs, storedOf(items)...)
}

// page returns the view of the list under way, unless the request changed since (gen).
func (s *listState) page(gen uint64) (view, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur, s.cur.moved != nil && s.cur.gen == gen
}

// complete ends the list under way and returns its view and what it brought.
func (s *listState) complete() (view, []stored) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listed = s.cur
	objs := s.objs
	s.objs = nil
	return s.cur, objs
}

// completed notes that the store is complete for v (a watch list's initial events, a splice).
func (s *listState) completed(v view) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listed = v
}

// lastListed returns the view the store was last made complete for; v when never.
func (s *listState) lastListed(v view) view {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listed.moved == nil {
		return v
	}
	return s.listed
}

// ask puts the owned namespaces into a list or watch request. Owning none, it asks for the
// namespace "-", which cannot exist, by shard selector and, where the informer sets no field
// selector of its own (controller-runtime replaces it), by field selector too.
func ask(opts *metav1.ListOptions, req request) {
	switch {
	case req.nothing:
		opts.ShardSelector = Selector([]string{"-"}).String()
		if opts.FieldSelector == "" {
			opts.FieldSelector = noNamespace
		}
	case req.selector != "":
		opts.ShardSelector = req.selector
	}
}

// keepInList drops from a list the items of shards v does not own, and returns those kept.
func (f *Filter) keepInList(list runtime.Object, v view) ([]runtime.Object, error) {
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	kept := items[:0]
	for _, it := range items {
		if f.keeps(v, it) {
			kept = append(kept, it)
		}
	}
	if len(kept) == len(items) {
		return kept, nil
	}
	return kept, meta.SetList(list, kept)
}
