package shard

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/reloader-operator/reloader/internal/testutil"
)

// What lists and watches ask for as shards and namespaces come and go, and when the informers
// must list again.
func TestFilterRequest(t *testing.T) {
	s, _ := NewSpace(2)
	f := NewFilter(s, true)
	f.NamespaceAdded("a")
	f.NamespaceAdded("b")
	f.NamespaceAdded("c")
	v := f.snapshot()
	req, moved := v.req, v.moved
	if !req.nothing {
		t.Fatalf("owning no shard asks for %+v", req)
	}
	mine := s.Of("a")
	f.Add(mine)
	select {
	case <-moved:
	default:
		t.Fatal("taking a shard lists nothing again")
	}
	var want []string
	for _, ns := range []string{"a", "b", "c"} {
		if s.Of(ns) == mine {
			want = append(want, ns)
		}
		if f.Owns(ns) != (s.Of(ns) == mine) {
			t.Errorf("Owns(%s) = %v", ns, f.Owns(ns))
		}
	}
	v = f.snapshot()
	req, moved = v.req, v.moved
	if req.nothing || req.selector != Selector(want).String() {
		t.Fatalf("asks for %+v, want the selector of %v", req, want)
	}
	f.NamespaceDeleted("a")
	select {
	case <-moved:
		t.Fatal("a namespace deleted ends the watches")
	default:
	}
	f.NamespaceAdded("a")
	select {
	case <-moved:
	default:
		t.Fatal("a namespace created in an owned shard is not listed")
	}
	f.Remove(mine)
	if req := f.snapshot().req; !req.nothing || f.Owns("a") {
		t.Fatalf("after giving the shard up: %+v, owns a: %v", req, f.Owns("a"))
	}
}

// A shard just taken is not ready until every informer has listed it.
func TestReadyAfterEveryInformerListed(t *testing.T) {
	s, _ := NewSpace(1)
	f := NewFilter(s, true)
	f.listed = []uint64{0, 0} // two informers, listed before the shard was taken
	f.took = []took{{rv: map[int]string{}}, {rv: map[int]string{}}}
	f.NamespaceAdded("a")
	f.Add(0)
	gen := f.snapshot().gen
	if own, ready := f.Ready("a"); !own || ready {
		t.Fatalf("just taken: own %v, ready %v", own, ready)
	}
	f.markListed(0, gen, "10", nil)
	if _, ready := f.Ready("a"); ready {
		t.Fatal("ready with one informer of two listed")
	}
	f.markListed(1, gen, "10", nil)
	if own, ready := f.Ready("a"); !own || !ready {
		t.Fatalf("both listed: own %v, ready %v", own, ready)
	}
}

// A list counts only once the informer's store holds what it brought: an informer takes
// events into its store through a queue, and a workload reconciled before would find its
// sources missing (TestSourcesOfAShardTakenAreNotCreations failed so under load: a Secret of
// the shard just taken was recorded as absent, then "created").
func TestReadyOnceTheStoreHoldsTheList(t *testing.T) {
	s, _ := NewSpace(1)
	f := NewFilter(s, true)
	store := &lookedUp{Store: toolscache.NewStore(toolscache.MetaNamespaceKeyFunc), seen: make(chan string, 64)}
	f.listed = []uint64{0}
	f.took = []took{{rv: map[int]string{}, store: store}}
	f.NamespaceAdded("a")
	f.Add(0)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "sec", ResourceVersion: "9"}}
	f.markListed(0, f.snapshot().gen, "10", storedOf([]runtime.Object{sec}))
	// The list's waiter has looked into the store (and found nothing) before each check.
	store.lookedAfter(t, "")
	if _, ready := f.Ready("a"); ready {
		t.Fatal("ready before the store holds the Secret listed")
	}
	older := sec.DeepCopy()
	older.ResourceVersion = "8"
	testutil.Must(t, store.Add(older))
	store.lookedAfter(t, "8")
	if _, ready := f.Ready("a"); ready {
		t.Fatal("ready while the store holds an older version of the Secret listed")
	}
	testutil.Must(t, store.Update(sec))
	testutil.Eventually(t, "ready once the store holds the list", func() error {
		if _, ready := f.Ready("a"); !ready {
			return fmt.Errorf("not ready")
		}
		return nil
	})
}

// An object listed that never reaches the store (deleted meanwhile) holds the list back for
// storeWait at most.
func TestWaitStoredEndsAtItsLimit(t *testing.T) {
	store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	start := time.Now()
	waitStored(store, []stored{{"a/gone", "5"}}, 300*time.Millisecond)
	if took := time.Since(start); took < 300*time.Millisecond || took > 2*time.Second {
		t.Errorf("returned after %v, want 300 ms", took)
	}
}

// An object whose shard is no longer owned when its add is handled (given up, or dropped
// for a Lease not renewed in time) is no creation of this replica's: reload-on-create and
// the creation notes must not act on it (TestSourcesOfAShardTakenAreNotCreations failed so
// under load).
func TestRelistedOfAShardNotOwned(t *testing.T) {
	s, _ := NewSpace(2)
	f := NewFilter(s, true)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "cfg", ResourceVersion: "7"}}
	if !f.Relisted(cm) {
		t.Error("an object of a shard never owned counts as created")
	}
	f.Add(s.Of("a"))
	f.Remove(s.Of("a"))
	if !f.Relisted(cm) {
		t.Error("an object of a shard given up counts as created")
	}
}

// lookedUp is a store that tells each lookup of a key, with the resourceVersion it found
// ("" for none): the positive signal that the list's waiter has seen what the store holds.
type lookedUp struct {
	toolscache.Store
	seen chan string
}

func (l *lookedUp) GetByKey(key string) (any, bool, error) {
	o, ok, err := l.Store.GetByKey(key)
	rv := ""
	if m, merr := meta.Accessor(o); ok && merr == nil {
		rv = m.GetResourceVersion()
	}
	select {
	case l.seen <- rv:
	default:
	}
	return o, ok, err
}

// lookedAfter waits until the waiter has looked up the key and found resourceVersion rv.
func (l *lookedUp) lookedAfter(t *testing.T, rv string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-l.seen:
			if got == rv {
				return
			}
		case <-timeout:
			t.Fatalf("the list's waiter never looked into the store and found version %q", rv)
		}
	}
}
