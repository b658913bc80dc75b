package shard

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	f.markListed(0, gen, "10")
	if _, ready := f.Ready("a"); ready {
		t.Fatal("ready with one informer of two listed")
	}
	f.markListed(1, gen, "10")
	if own, ready := f.Ready("a"); !own || !ready {
		t.Fatalf("both listed: own %v, ready %v", own, ready)
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
