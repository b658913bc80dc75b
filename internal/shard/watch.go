package shard

import (
	"context"
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// stream is one watch of an informer: it passes on the events of the owned namespaces and,
// when the owned shards or namespaces change, splices the change in rather than ending:
//
//   - the objects of the namespaces the stream did not bring and now must are listed at the
//     resourceVersion the stream has reached (resourceVersionMatch=Exact), and passed on as
//     adds;
//   - the objects of the shards given up are passed on as deletes, from the informer's store;
//   - when the request to the API server changed, the upstream watch is replaced by one under
//     the new request from that same resourceVersion, so nothing is missed or seen twice;
//   - a bookmark at that resourceVersion brings the informer's position back to it.
//
// The informer never lists again for a hand-over: client-go's reflector backs off
// exponentially (0.8 s doubling to 30 s, reset after two quiet minutes) between the ends
// of its list-and-watch cycles, so a few shards moving in a row used to delay the next
// list by half a minute. A stream that does not know its position yet (a watch list before
// its initial events end) or whose splice fails ends as expired, as before: the informer
// lists again.
// sent is an object passed on, and when.
type sent struct {
	obj runtime.Object
	at  time.Time
}

// recentFor is how long an add counts as recent: the informer takes each event into its store
// within microseconds of reading it, but a loaded process may lag. Only adds after the stream
// knows its position are kept (not a watch list's initial events), so a sync holds no more.
const recentFor = time.Second

type stream struct {
	f        *Filter
	k        int
	inner    toolscache.ListerWatcherWithContext
	ctx      context.Context
	base     metav1.ListOptions // the informer's options, before ask
	st       *listState
	exemplar runtime.Object

	upstream  watch.Interface
	view      view
	watchList bool
	// at is the resourceVersion the stream has reached, once known ("" before).
	at string
	// recent are the adds passed on lately: the informer may not have them in its store yet
	// when a splice looks there for the objects of the shards given up.
	recent []sent

	// sweeps are the checks still to come, after a splice, for objects of the shards given
	// up that the informer took into its store only after the splice looked there (sweep).
	sweeps []time.Duration
	sweep  *time.Timer

	// initial are the objects of a watch list's initial events, until they end.
	initial []stored

	out  chan watch.Event
	stop chan struct{}
	once sync.Once
}

// sweepAfter are the delays, from a splice, of the checks for objects of the shards given up
// left in the informer's store: its store takes what the watch sent asynchronously, so a
// splice can miss objects sent just before it (a list's, a previous splice's). A loaded
// process may lag by seconds; the checks stop after the last.
var sweepAfter = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second}

func (s *stream) start() watch.Interface {
	s.out, s.stop = make(chan watch.Event), make(chan struct{})
	go s.run()
	return s
}

func (s *stream) run() {
	defer close(s.out)
	defer func() { s.upstream.Stop() }()
	s.sweep = time.NewTimer(time.Hour)
	s.sweep.Stop()
	defer s.sweep.Stop()
	for {
		select {
		case ev, ok := <-s.upstream.ResultChan():
			if !ok {
				return
			}
			end := false
			switch ev.Type {
			case watch.Added, watch.Modified, watch.Deleted:
				if s.at != "" {
					s.at = resourceVersion(ev.Object)
				}
				if !s.f.keeps(s.view, ev.Object) {
					continue
				}
			case watch.Bookmark:
				end = s.watchList && initialEventsEnd(ev.Object)
				if s.at != "" || end {
					s.at = resourceVersion(ev.Object)
				}
			}
			if !s.send(ev) {
				return
			}
			if ev.Type == watch.Added && s.at != "" {
				s.remember(ev.Object)
			}
			if ev.Type == watch.Added && s.watchList && s.at == "" {
				s.initial = append(s.initial, storedOf([]runtime.Object{ev.Object})...)
			}
			if end {
				// A watch list: complete at the bookmark that ends the initial events.
				s.st.completed(s.view)
				s.f.markListed(s.k, s.view.gen, s.at, s.initial)
				s.initial = nil
			}
		case <-s.view.moved:
			if s.at == "" || !s.splice() {
				s.send(watch.Event{Type: watch.Error, Object: &metav1.Status{
					Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired,
					Message: "the shards this replica owns changed; list again"}})
				return
			}
		case <-s.sweep.C:
			if !s.sweepGiven() {
				return
			}
		case <-s.stop:
			return
		}
	}
}

// armSweeps schedules the checks after a splice (sweepAfter), from the first.
func (s *stream) armSweeps() {
	s.sweeps = sweepAfter
	s.sweep.Reset(s.sweeps[0])
}

// sweepGiven passes on, as deletes, the objects of shards the stream's view does not own that
// the informer's store holds, then a bookmark at the stream's position; and schedules the next
// check. False when the stream was stopped.
func (s *stream) sweepGiven() bool {
	if len(s.sweeps) > 1 {
		s.sweep.Reset(s.sweeps[1] - s.sweeps[0])
	}
	s.sweeps = s.sweeps[1:]
	left := s.stored(s.view)
	if len(left) == 0 || s.at == "" {
		return true
	}
	klog.V(2).InfoS("objects of shards given up were still cached after the hand-over; deleting them", "count", len(left), "resourceVersion", s.at)
	for _, o := range left {
		if !s.send(watch.Event{Type: watch.Deleted, Object: o}) {
			return false
		}
	}
	return s.send(watch.Event{Type: watch.Bookmark, Object: s.bookmark()})
}

// bookmark is a bookmark at the stream's position: the informer goes on from there after
// deletes that carried older resourceVersions.
func (s *stream) bookmark() runtime.Object {
	mark := s.exemplar.DeepCopyObject()
	if m, err := meta.Accessor(mark); err == nil {
		m.SetResourceVersion(s.at)
	}
	return mark
}

// splice brings the stream from its view to the filter's view of now, at s.at; false when it
// could not (the informer then lists again).
func (s *stream) splice() bool {
	nv := s.f.snapshot()
	added, err := s.gained(nv)
	if err != nil {
		klog.V(2).InfoS("could not list the namespaces taken at the stream's resourceVersion; listing again", "resourceVersion", s.at, "err", err)
		return false
	}
	if nv.req != s.view.req {
		opts := s.base
		opts.ResourceVersion, opts.ResourceVersionMatch, opts.SendInitialEvents = s.at, "", nil
		opts.AllowWatchBookmarks = true
		ask(&opts, nv.req)
		w, err := s.inner.WatchWithContext(s.ctx, opts)
		if err != nil {
			klog.V(2).InfoS("could not watch under the new shard selector; listing again", "resourceVersion", s.at, "err", err)
			return false
		}
		s.upstream.Stop()
		s.upstream = w
	}
	for _, o := range s.given(nv) {
		if !s.send(watch.Event{Type: watch.Deleted, Object: o}) {
			return true // stopped; run returns
		}
	}
	for _, o := range added {
		if !s.send(watch.Event{Type: watch.Added, Object: o}) {
			return true
		}
		s.remember(o)
	}
	// The deletes carried older resourceVersions: the informer goes on from s.at.
	if !s.send(watch.Event{Type: watch.Bookmark, Object: s.bookmark()}) {
		return true
	}
	// The reflector takes each event into its store before it reads the next: what the
	// splice brought is in.
	s.view = nv
	s.st.completed(nv)
	s.f.markListed(s.k, nv.gen, s.at, storedOf(added))
	s.armSweeps()
	return true
}

// gained lists, at s.at, the objects nv brings that the stream's view did not.
func (s *stream) gained(nv view) ([]runtime.Object, error) {
	if nv.req.nothing {
		return nil, nil
	}
	opts := s.base
	opts.ResourceVersion, opts.ResourceVersionMatch = s.at, metav1.ResourceVersionMatchExact
	opts.SendInitialEvents, opts.AllowWatchBookmarks, opts.TimeoutSeconds, opts.Watch = nil, false, nil, false
	opts.Limit = 500
	if s.f.serverSide && nv.req.selector != "" {
		var gained []string
		for ns := range nv.mine {
			if !s.f.delivers(s.view, ns) {
				gained = append(gained, ns)
			}
		}
		if len(gained) == 0 {
			return nil, nil
		}
		opts.ShardSelector = Selector(gained).String()
	} else {
		// More than before: a shard taken, or the server now sends what it did not.
		more := s.view.req.nothing || s.f.serverSide && s.view.req.selector != ""
		for i := range nv.owned {
			more = more || !s.view.owned[i]
		}
		if !more {
			return nil, nil // the same shards, and the server sends them all anyway
		}
	}
	var out []runtime.Object
	for {
		list, err := s.inner.ListWithContext(s.ctx, opts)
		if err != nil {
			return nil, err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			m, err := meta.Accessor(it)
			if err != nil {
				continue
			}
			if ns := m.GetNamespace(); nv.owned[s.f.space.Of(ns)] && !s.f.delivers(s.view, ns) {
				out = append(out, it)
			}
		}
		lm, err := meta.ListAccessor(list)
		if err != nil || lm.GetContinue() == "" {
			return out, nil
		}
		opts.Continue, opts.ResourceVersion, opts.ResourceVersionMatch = lm.GetContinue(), "", ""
	}
}

// remember notes an add passed on, and forgets those no longer recent.
func (s *stream) remember(obj runtime.Object) {
	now := time.Now()
	k := 0
	for k < len(s.recent) && now.Sub(s.recent[k].at) > recentFor {
		k++
	}
	s.recent = append(s.recent[k:], sent{obj: obj, at: now})
}

// given returns the objects of the shards nv does not own that the informer holds: those in
// its store, and those added lately that may not be there yet.
func (s *stream) given(nv view) []runtime.Object {
	out := s.stored(nv)
	keys := make(map[string]bool, len(out))
	for _, o := range out {
		if k, err := toolscache.MetaNamespaceKeyFunc(o); err == nil {
			keys[k] = true
		}
	}
	for _, r := range s.recent {
		if s.f.keeps(nv, r.obj) {
			continue
		}
		if k, err := toolscache.MetaNamespaceKeyFunc(r.obj); err == nil && !keys[k] {
			keys[k] = true
			out = append(out, r.obj)
		}
	}
	return out
}

// stored returns the objects of the shards nv does not own that the informer's store holds.
func (s *stream) stored(nv view) []runtime.Object {
	s.f.mu.Lock()
	store := s.f.took[s.k].store
	s.f.mu.Unlock()
	if store == nil {
		return nil
	}
	var out []runtime.Object
	for _, o := range store.List() {
		if obj, ok := o.(runtime.Object); ok && !s.f.keeps(nv, obj) {
			out = append(out, obj)
		}
	}
	return out
}

func resourceVersion(o runtime.Object) string {
	m, err := meta.Accessor(o)
	if err != nil {
		return ""
	}
	return m.GetResourceVersion()
}

func initialEventsEnd(o runtime.Object) bool {
	m, err := meta.Accessor(o)
	return err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true"
}

func (s *stream) send(ev watch.Event) bool {
	select {
	case s.out <- ev:
		return true
	case <-s.stop:
		return false
	}
}

func (s *stream) Stop()                          { s.once.Do(func() { close(s.stop) }) }
func (s *stream) ResultChan() <-chan watch.Event { return s.out }
