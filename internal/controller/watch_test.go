package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/testutil/follower"
)

// inNamespace selects the objects of ns, or the one named name when it is set.
func inNamespace(ns, name string) []client.ListOption {
	opts := []client.ListOption{client.InNamespace(ns)}
	if name != "" {
		opts = append(opts, client.MatchingFields{"metadata.name": name})
	}
	return opts
}

// followObjects starts a follower.Follower, on the API server of the tests, of the objects of
// list's type that opts select.
func followObjects(t *testing.T, list client.ObjectList, cfg follower.Config, each func(watch.EventType, client.Object), opts ...client.ListOption) *follower.Follower {
	t.Helper()
	wc, err := client.NewWithWatch(restConfig, client.Options{Scheme: k8s.Scheme()})
	testutil.Must(t, err)
	return follower.Start(t, wc, list, cfg, each, opts...)
}

// watchObjects follows, for counts of spec changes, the objects of list's type in ns (the one
// named name when it is set).
func watchObjects(t *testing.T, list client.ObjectList, ns, name string, each func(watch.EventType, client.Object)) *follower.Follower {
	t.Helper()
	return followObjects(t, list, follower.Config{}, each, inNamespace(ns, name)...)
}

// The tests' follower.Follower counts every template change of a Deployment though the API
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
	counted := func(t *testing.T, cfg follower.Config) (*follower.Follower, func() int) {
		last, n := "", 0
		f := followObjects(t, &appsv1.DeploymentList{}, cfg, func(_ watch.EventType, o client.Object) {
			b, _ := json.Marshal(o.(*appsv1.Deployment).Spec.Template)
			if last != "" && last != string(b) {
				n++
			}
			last = string(b)
		}, inNamespace(ns, d.Name)...)
		return f, func() int {
			f.Lock()
			defer f.Unlock()
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
	t.Run("resumed", func(t *testing.T) {
		h, reopen := heldAt(2, false)
		f, changes := counted(t, follower.Config{Timeout: time.Second, Reopen: reopen})
		whileHeld(h, func() { roll(); roll(); roll() })
		f.CaughtUp(t)
		if got := changes(); got != 3 {
			t.Errorf("%d template changes counted across the watch's end, want 3", got)
		}
		testutil.Eventually(t, "the API server ended the watch twice more", func() error {
			if opens, _ := f.Stats(); opens < 4 {
				return fmt.Errorf("%d watches opened", opens)
			}
			return nil
		})
		roll()
		f.CaughtUp(t)
		if got := changes(); got != 4 {
			t.Errorf("%d template changes counted, want 4", got)
		}
		if _, relists := f.Stats(); relists != 0 {
			t.Errorf("listed again %d times, want 0: the watch resumes from the last version seen", relists)
		}
	})

	t.Run("expired", func(t *testing.T) {
		h, reopen := heldAt(2, true)
		f, changes := counted(t, follower.Config{Timeout: time.Second, Reopen: reopen})
		whileHeld(h, roll)
		f.CaughtUp(t)
		if got := changes(); got != 1 {
			t.Errorf("%d template changes counted across an expired watch, want 1", got)
		}
		if _, relists := f.Stats(); relists != 1 {
			t.Errorf("listed again %d times, want 1", relists)
		}
		roll()
		f.CaughtUp(t)
		if got := changes(); got != 2 {
			t.Errorf("%d template changes counted after the list, want 2", got)
		}
	})

	t.Run("lost", func(t *testing.T) {
		h, reopen := heldAt(2, true)
		told := make(chan error, 1)
		f, _ := counted(t, follower.Config{Timeout: time.Second, Reopen: reopen, OnLost: func(err error) { told <- err }})
		whileHeld(h, func() { roll(); roll() })
		var err error
		select {
		case err = <-told:
		case <-time.After(testutil.Timeout()):
			t.Fatal("the follower never said it lost track of two changes unseen")
		}
		if !strings.Contains(err.Error(), "web changed while the watch was down") {
			t.Errorf("after two changes unseen: %v, want the watch lost", err)
		}
		if err := f.Err(); err == nil {
			t.Error("Err is nil after the follower lost track")
		}
	})
}
