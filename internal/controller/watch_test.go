package controller_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
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

// gapRule says what a follower may make of the objects that changed while its watch was
// down and could not be resumed (its resourceVersion expired, 410 Gone): it lists them again
// and compares with what it saw last of each, but the writes in between are gone.
type gapRule int

const (
	// gapSpec is for counts of spec changes (a pod template's): an object whose generation
	// moved by at most one is handed over as Modified, its change counted exactly; more
	// (changes that may have merged, an object deleted meanwhile) and the watch is lost.
	gapSpec gapRule = iota
	// gapNone is for counts of every write, or their times: any change is lost.
	gapNone
	// gapLatest is for the latest state only: what is listed again is all there is to know.
	gapLatest
)

// followConfig sets up a follower; the zero value suits counts of spec changes.
type followConfig struct {
	gaps gapRule
	// timeout, if set, has the API server end each watch after it (whole seconds).
	timeout time.Duration
	// reopen, if set, is called before each watch but the first (n counts them from 1) with
	// the resourceVersion to resume from; an error is the API server's answer. For the
	// follower's own tests: a re-open held back, or refused as expired (the API server of the
	// tests has its history since it started: etcd is not compacted that early).
	reopen func(ctx context.Context, n int, rv string) error
}

// follower watches the objects of one list type in a namespace (one of them when name is
// set) and keeps the resourceVersion last seen of each, so that what a test counts from the
// watch can first catch up with the API server: a write already made could otherwise still be
// on its way, and a check that nothing happened pass for being early.
//
// The API server ends watches (their timeout, or a watcher too slow for it under load, which
// it drops): the follower then watches again from the last resourceVersion it saw, and misses
// nothing. If that version is gone too (410), it lists again under its gapRule; when that
// cannot tell what happened meanwhile, or the watch stops for good, the next read of the
// follower (caughtUp, check) fails the test saying so, rather than count short.
type follower struct {
	mu   sync.Mutex
	list client.ObjectList
	opts []client.ListOption
	cfg  followConfig
	what string
	each func(watch.EventType, client.Object)
	seen map[string]seenAs // by name
	lost []string          // what the follower could not make up for
	// opens and relists count the watches opened and the lists made again.
	opens, relists int
}

// seenAs is what a follower saw last of an object.
type seenAs struct {
	rv      string
	gen     int64
	deleted bool
}

// inNamespace selects the objects of ns, or the one named name when it is set.
func inNamespace(ns, name string) []client.ListOption {
	opts := []client.ListOption{client.InNamespace(ns)}
	if name != "" {
		opts = append(opts, client.MatchingFields{"metadata.name": name})
	}
	return opts
}

// watchObjects starts a follower for counts of spec changes; each is called, under f.mu, with
// each object the watch sends, starting with those there now.
func watchObjects(t *testing.T, list client.ObjectList, ns, name string, each func(watch.EventType, client.Object)) *follower {
	t.Helper()
	return followObjects(t, list, followConfig{}, each, inNamespace(ns, name)...)
}

// followObjects starts a follower of the objects of list's type that opts select; each is called,
// under f.mu, with each object the watch sends, starting with those there now.
func followObjects(t *testing.T, list client.ObjectList, cfg followConfig, each func(watch.EventType, client.Object), opts ...client.ListOption) *follower {
	t.Helper()
	gvk, err := apiutil.GVKForObject(list, k8s.Scheme())
	testutil.Must(t, err)
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	f := &follower{list: list, opts: opts, cfg: cfg, each: each, seen: map[string]seenAs{},
		what: fmt.Sprintf("%s in %q", gvk.Kind, lo.Namespace)}
	if lo.FieldSelector != nil {
		f.what += " " + lo.FieldSelector.String()
	}
	if lo.LabelSelector != nil {
		f.what += " " + lo.LabelSelector.String()
	}
	wc, err := client.NewWithWatch(restConfig, client.Options{Scheme: k8s.Scheme()})
	testutil.Must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	initial := list.DeepCopyObject().(client.ObjectList)
	testutil.Must(t, wc.List(ctx, initial, f.opts...))
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
		f.run(ctx, wc, initial.GetResourceVersion())
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if err := f.lostErr(); err != nil {
			t.Log(err)
		}
	})
	return f
}

// deliver notes o as seen and hands it to each; f.mu is held.
func (f *follower) deliver(typ watch.EventType, o client.Object) {
	f.seen[o.GetName()] = seenAs{rv: o.GetResourceVersion(), gen: o.GetGeneration(), deleted: typ == watch.Deleted}
	f.each(typ, o)
}

// fail notes that the follower lost track.
func (f *follower) fail(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lost = append(f.lost, fmt.Sprintf(format, args...))
}

// run watches from rv until ctx is done, again from the last version seen whenever the API
// server ends the watch, and from a new list when that version is gone.
func (f *follower) run(ctx context.Context, wc client.WithWatch, rv string) {
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return f.open(ctx, wc, o)
	}}
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
		if rv, err = f.relist(ctx, wc); err != nil {
			if ctx.Err() == nil {
				f.fail("listing again after %v: %v", end, err)
			}
			return
		}
	}
}

// open is one watch of the RetryWatcher's.
func (f *follower) open(ctx context.Context, wc client.WithWatch, o metav1.ListOptions) (watch.Interface, error) {
	f.mu.Lock()
	f.opens++
	n := f.opens
	f.mu.Unlock()
	if f.cfg.timeout > 0 {
		s := int64(f.cfg.timeout / time.Second)
		o.TimeoutSeconds = &s
	}
	var w watch.Interface
	var err error
	if n > 1 && f.cfg.reopen != nil {
		err = f.cfg.reopen(ctx, n, o.ResourceVersion)
	}
	if err == nil {
		w, err = wc.Watch(ctx, f.list.DeepCopyObject().(client.ObjectList), append(slices.Clone(f.opts), &client.ListOptions{Raw: &o})...)
	}
	var status apierrors.APIStatus
	if (apierrors.IsResourceExpired(err) || apierrors.IsGone(err)) && errors.As(err, &status) {
		// Refused outright, the RetryWatcher would ask again for the same version for ever;
		// sent as the API server's watch cache sends it, it stops and hands it over.
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
func (f *follower) consume(w watch.Interface) error {
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
// changed since it was last seen (Added if new), notes under the gapRule what cannot be made
// up for, and returns the list's resourceVersion to watch from.
func (f *follower) relist(ctx context.Context, wc client.WithWatch) (string, error) {
	now := f.list.DeepCopyObject().(client.ObjectList)
	if err := wc.List(ctx, now, f.opts...); err != nil {
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
		case f.cfg.gaps == gapLatest:
		case f.cfg.gaps == gapSpec && o.GetGeneration() > 0 && o.GetGeneration()-was <= 1:
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
			if f.cfg.gaps != gapLatest {
				f.lost = append(f.lost, name+" was deleted while the watch was down, after changes unknown")
			}
			f.seen[name] = seenAs{rv: now.GetResourceVersion(), deleted: true}
		}
	}
	return now.GetResourceVersion(), nil
}

// lostErr says what the follower lost track of, if anything.
func (f *follower) lostErr() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.lost) == 0 {
		return nil
	}
	return fmt.Errorf("the test's watch of %s was lost, what it counts would be short: %s", f.what, strings.Join(f.lost, "; "))
}

// check fails the test if the follower lost track.
func (f *follower) check(t *testing.T) {
	t.Helper()
	if err := f.lostErr(); err != nil {
		t.Fatal(err)
	}
}

// caughtUpOn is caughtUp for one object followed.
func (f *follower) caughtUpOn(t *testing.T, obj client.Object) {
	t.Helper()
	f.check(t)
	cur := obj.DeepCopyObject().(client.Object)
	err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), cur)
	if apierrors.IsNotFound(err) {
		return
	}
	testutil.Must(t, err)
	testutil.Eventually(t, "the test's watch caught up", func() error {
		f.check(t)
		f.mu.Lock()
		defer f.mu.Unlock()
		if seen := f.seen[cur.GetName()].rv; !atLeast(seen, cur.GetResourceVersion()) {
			return fmt.Errorf("%s seen at %q, now %s", cur.GetName(), seen, cur.GetResourceVersion())
		}
		return nil
	})
}

// caughtUp waits until the watch has sent the version the API server has now of every
// object it follows (read as metadata only: a test may follow hundreds).
func (f *follower) caughtUp(t *testing.T) {
	t.Helper()
	f.check(t)
	gvk, err := apiutil.GVKForObject(f.list, k8s.Scheme())
	testutil.Must(t, err)
	now := &metav1.PartialObjectMetadataList{}
	now.SetGroupVersionKind(gvk)
	testutil.Must(t, k8s.List(context.Background(), now, f.opts...))
	testutil.Eventually(t, "the test's watch caught up", func() error {
		f.check(t)
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, o := range now.Items {
			if seen := f.seen[o.GetName()].rv; !atLeast(seen, o.GetResourceVersion()) {
				return fmt.Errorf("%s seen at %q, now %s", o.GetName(), seen, o.GetResourceVersion())
			}
		}
		return nil
	})
}

// The follower of the tests counts every template change of a Deployment though the API
// server ends its watch (each after a second, one of them held back while the Deployment
// changes three times), and, when the version to resume from is gone (410), lists again and
// counts a change made meanwhile, or, when two were, says that it lost track rather than
// count one.
func TestFollowerCountsThroughTheWatchEnding(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	d := deployment(ns, "web", nil, podSpec())
	create(t, d)
	roll := func() {
		t.Helper()
		update(t, d, func(d *appsv1.Deployment) {
			if d.Spec.Template.Annotations == nil {
				d.Spec.Template.Annotations = map[string]string{}
			}
			d.Spec.Template.Annotations["n"] = time.Now().Format(time.RFC3339Nano)
		})
	}
	// counted follows d with cfg and counts its template changes.
	counted := func(t *testing.T, cfg followConfig) (*follower, func() int) {
		last, n := "", 0
		f := followObjects(t, &appsv1.DeploymentList{}, cfg, func(_ watch.EventType, o client.Object) {
			b, _ := json.Marshal(o.(*appsv1.Deployment).Spec.Template)
			if last != "" && last != string(b) {
				n++
			}
			last = string(b)
		}, inNamespace(ns, d.Name)...)
		return f, func() int {
			f.mu.Lock()
			defer f.mu.Unlock()
			return n
		}
	}
	// heldAt holds back the watch opened n-th until the test has made its changes, then
	// answers it as the API server does a version it no longer has if expire is set.
	type hold struct {
		held, release chan struct{}
	}
	heldAt := func(n int, expire bool) (hold, func(context.Context, int, string) error) {
		h := hold{make(chan struct{}), make(chan struct{})}
		return h, func(ctx context.Context, i int, rv string) error {
			if i != n {
				return nil
			}
			close(h.held)
			select {
			case <-h.release:
			case <-ctx.Done():
			}
			if expire {
				return apierrors.NewResourceExpired("too old resource version: " + rv)
			}
			return nil
		}
	}
	whileHeld := func(h hold, changes func()) {
		t.Helper()
		select {
		case <-h.held:
		case <-time.After(testutil.Timeout()):
			t.Fatal("the API server did not end the watch")
		}
		changes()
		close(h.release)
	}
	stats := func(f *follower) (opens, relists int) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.opens, f.relists
	}

	t.Run("resumed", func(t *testing.T) {
		h, reopen := heldAt(2, false)
		f, changes := counted(t, followConfig{timeout: time.Second, reopen: reopen})
		whileHeld(h, func() { roll(); roll(); roll() })
		f.caughtUp(t)
		if got := changes(); got != 3 {
			t.Errorf("%d template changes counted across the watch's end, want 3", got)
		}
		testutil.Eventually(t, "the API server ended the watch twice more", func() error {
			if opens, _ := stats(f); opens < 4 {
				return fmt.Errorf("%d watches opened", opens)
			}
			return nil
		})
		roll()
		f.caughtUp(t)
		if got := changes(); got != 4 {
			t.Errorf("%d template changes counted, want 4", got)
		}
		if _, relists := stats(f); relists != 0 {
			t.Errorf("listed again %d times, want 0: the watch resumes from the last version seen", relists)
		}
	})

	t.Run("expired", func(t *testing.T) {
		h, reopen := heldAt(2, true)
		f, changes := counted(t, followConfig{timeout: time.Second, reopen: reopen})
		whileHeld(h, roll)
		f.caughtUp(t)
		if got := changes(); got != 1 {
			t.Errorf("%d template changes counted across an expired watch, want 1", got)
		}
		if _, relists := stats(f); relists != 1 {
			t.Errorf("listed again %d times, want 1", relists)
		}
		roll()
		f.caughtUp(t)
		if got := changes(); got != 2 {
			t.Errorf("%d template changes counted after the list, want 2", got)
		}
	})

	t.Run("lost", func(t *testing.T) {
		h, reopen := heldAt(2, true)
		f, _ := counted(t, followConfig{timeout: time.Second, reopen: reopen})
		whileHeld(h, func() { roll(); roll() })
		testutil.Eventually(t, "the follower listed again", func() error {
			if _, relists := stats(f); relists != 1 {
				return fmt.Errorf("listed again %d times", relists)
			}
			return nil
		})
		err := f.lostErr()
		if err == nil || !strings.Contains(err.Error(), "web changed while the watch was down") {
			t.Errorf("after two changes unseen: %v, want the watch lost", err)
		}
	})
}
