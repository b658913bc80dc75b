// Package follower is the tests' watch of the objects they count (rolls, writes, records): one
// that outlives the API server ending it and never counts short in silence.
package follower

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/reloader-operator/reloader/internal/testutil"
)

// GapRule says what a follower may make of the objects that changed while its watch was
// down and could not be resumed (its resourceVersion expired, 410 Gone): it lists them again
// and compares with what it saw last of each, but the writes in between are gone.
type GapRule int

const (
	// GapSpec is for counts of spec changes (a pod template's): an object whose generation
	// moved by at most one is handed over as Modified, its change counted exactly; more
	// (changes that may have merged, an object deleted meanwhile) and the watch is lost.
	GapSpec GapRule = iota
	// GapNone is for counts of every write, or their times: any change is lost.
	GapNone
	// GapLatest is for the latest state only: what is listed again is all there is to know.
	GapLatest
)

// Config sets up a Follower; the zero value suits counts of spec changes.
type Config struct {
	Gaps GapRule
	// Timeout, if set, has the API server end each watch after it (whole seconds).
	Timeout time.Duration
	// Reopen, if set, is called before each watch but the first (n counts them from 1) with
	// the resourceVersion to resume from; an error is the API server's answer. For the
	// follower's own tests: a re-open held back, or refused as expired (the API server of the
	// tests has its history since it started: etcd is not compacted that early).
	Reopen func(ctx context.Context, n int, rv string) error
	// OnLost, if set, hears (from the Follower's goroutine, once) that it lost track; by
	// default the test fails at once (t.Errorf), whether or not it reads a count after.
	OnLost func(error)
}

// Follower watches the objects of one list type in a namespace (one of them when name is
// set) and keeps the resourceVersion last seen of each, so that what a test counts from the
// watch can first catch up with the API server: a write already made could otherwise still be
// on its way, and a check that nothing happened pass for being early.
//
// The API server ends watches (their timeout, or a watcher too slow for it under load, which
// it drops): the follower then watches again from the last resourceVersion it saw, and misses
// nothing. If that version is gone too (410), it lists again under its GapRule; when that
// cannot tell what happened meanwhile, or the watch stops for good, the test fails saying so
// (Config.OnLost), and the next read of the Follower (CaughtUp, Check) stops it, rather than
// count short.
type Follower struct {
	mu   sync.Mutex
	c    client.WithWatch
	list client.ObjectList
	opts []client.ListOption
	cfg  Config
	what string
	each func(watch.EventType, client.Object)
	seen map[string]seenAs // by name
	lost []string          // what the follower could not make up for
	told bool              // OnLost heard of it; the Follower's goroutine's
	// opens and relists count the watches opened and the lists made again.
	opens, relists int
}

// seenAs is what a follower saw last of an object.
type seenAs struct {
	rv      string
	gen     int64
	deleted bool
}

// Start starts a Follower of the objects of list's type that opts select, through c;
// each is called, with the Follower locked, with each object the watch sends, starting with
// those there now. The watch stops when the test ends.
func Start(t testing.TB, c client.WithWatch, list client.ObjectList, cfg Config, each func(watch.EventType, client.Object), opts ...client.ListOption) *Follower {
	t.Helper()
	gvk, err := apiutil.GVKForObject(list, c.Scheme())
	testutil.Must(t, err)
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	f := &Follower{c: c, list: list, opts: opts, cfg: cfg, each: each, seen: map[string]seenAs{},
		what: fmt.Sprintf("%s in %q", gvk.Kind, lo.Namespace)}
	if lo.FieldSelector != nil {
		f.what += " " + lo.FieldSelector.String()
	}
	if lo.LabelSelector != nil {
		f.what += " " + lo.LabelSelector.String()
	}
	ctx, cancel := context.WithCancel(context.Background())
	initial := list.DeepCopyObject().(client.ObjectList)
	testutil.Must(t, c.List(ctx, initial, f.opts...))
	items, err := meta.ExtractList(initial)
	testutil.Must(t, err)
	f.mu.Lock()
	for _, item := range items {
		f.deliver(watch.Added, item.(client.Object))
	}
	f.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.run(ctx, initial.GetResourceVersion())
	}()
	if f.cfg.OnLost == nil {
		f.cfg.OnLost = func(err error) { t.Error(err) }
	}
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return f
}

// Lock guards what each writes, for its readers; each runs with the Follower locked.
func (f *Follower) Lock() { f.mu.Lock() }

// Unlock undoes Lock.
func (f *Follower) Unlock() { f.mu.Unlock() }

// Stats counts the watches opened and the lists made again after a watch could not resume.
func (f *Follower) Stats() (opens, relists int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.opens, f.relists
}

// deliver notes o as seen and hands it to each; f.mu is held.
func (f *Follower) deliver(typ watch.EventType, o client.Object) {
	f.seen[o.GetName()] = seenAs{rv: o.GetResourceVersion(), gen: o.GetGeneration(), deleted: typ == watch.Deleted}
	f.each(typ, o)
}

// fail notes that the follower lost track.
func (f *Follower) fail(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lost = append(f.lost, fmt.Sprintf(format, args...))
}

// run watches from rv until ctx is done, again from the last version seen whenever the API
// server ends the watch, and from a new list when that version is gone.
func (f *Follower) run(ctx context.Context, rv string) {
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return f.open(ctx, o)
	}}
	defer f.tell()
	for {
		w, err := watchtools.NewRetryWatcherWithContext(ctx, rv, lw)
		if err != nil {
			f.fail("watching from %q: %v", rv, err)
			return
		}
		end := f.consume(w)
		w.Stop()
		if ctx.Err() != nil {
			return
		}
		if !apierrors.IsResourceExpired(end) && !apierrors.IsGone(end) {
			f.fail("the watch stopped: %v", end)
			return
		}
		if rv, err = f.relist(ctx); err != nil {
			if ctx.Err() == nil {
				f.fail("listing again after %v: %v", end, err)
			}
			return
		}
		f.tell()
	}
}

// tell has OnLost hear, once, that the Follower lost track, if it has.
func (f *Follower) tell() {
	if err := f.Err(); err != nil && !f.told {
		f.told = true
		f.cfg.OnLost(err)
	}
}

// open is one watch of the RetryWatcher's.
func (f *Follower) open(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	f.mu.Lock()
	f.opens++
	n := f.opens
	f.mu.Unlock()
	if f.cfg.Timeout > 0 {
		s := int64(f.cfg.Timeout / time.Second)
		o.TimeoutSeconds = &s
	}
	var w watch.Interface
	var err error
	if n > 1 && f.cfg.Reopen != nil {
		err = f.cfg.Reopen(ctx, n, o.ResourceVersion)
	}
	if err == nil {
		w, err = f.c.Watch(ctx, f.list.DeepCopyObject().(client.ObjectList), append(slices.Clone(f.opts), &client.ListOptions{Raw: &o})...)
	}
	return ExpiredAsEvent(w, err)
}

// ExpiredAsEvent returns a watch refused outright because its resourceVersion is gone (410) as
// a watch whose one event is that error, as the API server's watch cache sends it: a
// RetryWatcher then stops and hands it over, where it would ask again for the same version for
// ever. Any other result is returned as it is.
func ExpiredAsEvent(w watch.Interface, err error) (watch.Interface, error) {
	var status apierrors.APIStatus
	if (apierrors.IsResourceExpired(err) || apierrors.IsGone(err)) && errors.As(err, &status) {
		ch := make(chan watch.Event, 1)
		st := status.Status()
		ch <- watch.Event{Type: watch.Error, Object: &st}
		close(ch)
		return watch.NewProxyWatcher(ch), nil
	}
	return w, err
}

// consume delivers the events of w until it ends, and returns the error it ended with (nil
// if it just closed: only when ctx is done).
func (f *Follower) consume(w watch.Interface) error {
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Error:
			return apierrors.FromObject(ev.Object)
		case watch.Added, watch.Modified, watch.Deleted:
			if o, ok := ev.Object.(client.Object); ok {
				f.mu.Lock()
				f.deliver(ev.Type, o)
				f.mu.Unlock()
			}
		}
	}
	return errors.New("the watch closed")
}

// relist lists the objects again after the watch could not resume, hands each over that
// changed since it was last seen (Added if new), notes under the GapRule what cannot be made
// up for, and returns the list's resourceVersion to watch from.
func (f *Follower) relist(ctx context.Context) (string, error) {
	now := f.list.DeepCopyObject().(client.ObjectList)
	if err := f.c.List(ctx, now, f.opts...); err != nil {
		return "", err
	}
	items, err := meta.ExtractList(now)
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.relists++
	listed := map[string]bool{}
	for _, item := range items {
		o := item.(client.Object)
		name := o.GetName()
		listed[name] = true
		last, known := f.seen[name]
		known = known && !last.deleted
		if known && last.rv == o.GetResourceVersion() {
			continue
		}
		typ, was := watch.Modified, last.gen
		if !known {
			typ, was = watch.Added, 1
		}
		switch {
		case f.cfg.Gaps == GapLatest:
		case f.cfg.Gaps == GapSpec && o.GetGeneration() > 0 && o.GetGeneration()-was <= 1:
		case known:
			f.lost = append(f.lost, fmt.Sprintf("%s changed while the watch was down (resourceVersion %s to %s, generation %d to %d)",
				name, last.rv, o.GetResourceVersion(), was, o.GetGeneration()))
		default:
			f.lost = append(f.lost, fmt.Sprintf("%s was created while the watch was down and is at generation %d", name, o.GetGeneration()))
		}
		f.deliver(typ, o)
	}
	for name, last := range f.seen {
		if !listed[name] && !last.deleted {
			if f.cfg.Gaps != GapLatest {
				f.lost = append(f.lost, name+" was deleted while the watch was down, after changes unknown")
			}
			f.seen[name] = seenAs{rv: now.GetResourceVersion(), deleted: true}
		}
	}
	return now.GetResourceVersion(), nil
}

// Err says what the Follower lost track of, if anything.
func (f *Follower) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.lost) == 0 {
		return nil
	}
	return fmt.Errorf("the test's watch of %s was lost, what it counts would be short: %s", f.what, strings.Join(f.lost, "; "))
}

// Check fails the test if the Follower lost track.
func (f *Follower) Check(t testing.TB) {
	t.Helper()
	if err := f.Err(); err != nil {
		t.Fatal(err)
	}
}

// CaughtUpOn is CaughtUp for one object followed.
func (f *Follower) CaughtUpOn(t testing.TB, obj client.Object) {
	t.Helper()
	f.Check(t)
	cur := obj.DeepCopyObject().(client.Object)
	err := f.c.Get(context.Background(), client.ObjectKeyFromObject(obj), cur)
	if apierrors.IsNotFound(err) {
		return
	}
	testutil.Must(t, err)
	testutil.Eventually(t, "the test's watch caught up", func() error {
		f.Check(t)
		f.mu.Lock()
		defer f.mu.Unlock()
		if seen := f.seen[cur.GetName()].rv; !AtLeast(seen, cur.GetResourceVersion()) {
			return fmt.Errorf("%s seen at %q, now %s", cur.GetName(), seen, cur.GetResourceVersion())
		}
		return nil
	})
}

// CaughtUp waits until the watch has sent the version the API server has now of every
// object it follows (read as metadata only: a test may follow hundreds).
func (f *Follower) CaughtUp(t testing.TB) {
	t.Helper()
	f.Check(t)
	gvk, err := apiutil.GVKForObject(f.list, f.c.Scheme())
	testutil.Must(t, err)
	now := &metav1.PartialObjectMetadataList{}
	now.SetGroupVersionKind(gvk)
	testutil.Must(t, f.c.List(context.Background(), now, f.opts...))
	testutil.Eventually(t, "the test's watch caught up", func() error {
		f.Check(t)
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, o := range now.Items {
			if seen := f.seen[o.GetName()].rv; !AtLeast(seen, o.GetResourceVersion()) {
				return fmt.Errorf("%s seen at %q, now %s", o.GetName(), seen, o.GetResourceVersion())
			}
		}
		return nil
	})
}

// AtLeast reports whether resourceVersion rv is want or later (they are numbers in etcd; the
// API server does not promise it, so other strings are compared for equality).
func AtLeast(rv, want string) bool {
	a, errA := strconv.ParseUint(rv, 10, 64)
	b, errB := strconv.ParseUint(want, 10, 64)
	if errA != nil || errB != nil {
		return rv == want
	}
	return a >= b
}
