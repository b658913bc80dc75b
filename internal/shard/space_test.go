package shard

import (
	"fmt"
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apisharding "k8s.io/apiserver/pkg/sharding"
)

// The shards cover the hash space exactly, and each namespace lands in the shard whose
// selector, as the API server parses and applies it, matches the namespace's objects.
func TestShardsCoverTheSpaceAsTheServerReadsThem(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 12, MaxShards} {
		s, err := NewSpace(n)
		if err != nil {
			t.Fatal(err)
		}
		if s.start(0) != 0 || s.end(n-1) != "0x10000000000000000" {
			t.Fatalf("%d shards: space [%x, %s)", n, s.start(0), s.end(n-1))
		}
		parsed := make([]func(ns string) bool, n)
		for i := range n {
			sel, err := apisharding.Parse(s.Selector([]int{i}).String())
			if err != nil {
				t.Fatalf("%d shards, shard %d: the server refuses %q: %v", n, i, s.Selector([]int{i}).String(), err)
			}
			parsed[i] = func(ns string) bool {
				ok, err := sel.Matches(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x"}})
				if err != nil {
					t.Fatal(err)
				}
				return ok
			}
		}
		for k := range 300 {
			ns := fmt.Sprintf("team-%d", k)
			want := s.Of(ns)
			for i := range n {
				if parsed[i](ns) != (i == want) {
					t.Fatalf("%d shards: %s is in shard %d here, and the server's selector of shard %d says %v", n, ns, want, i, parsed[i](ns))
				}
			}
		}
	}
	if _, err := NewSpace(0); err == nil {
		t.Error("0 shards accepted")
	}
	if _, err := NewSpace(MaxShards + 1); err == nil {
		t.Error("too many shards accepted")
	}
}

// Edges: the last hash of a shard and the first of the next.
func TestOfAtShardEdges(t *testing.T) {
	s, _ := NewSpace(3)
	for i := 1; i < 3; i++ {
		b := s.start(i)
		if got := s.ofHash(b); got != i {
			t.Errorf("hash %x: shard %d, want %d", b, got, i)
		}
		if got := s.ofHash(b - 1); got != i-1 {
			t.Errorf("hash %x: shard %d, want %d", b-1, got, i-1)
		}
	}
	if got := s.ofHash(math.MaxUint64); got != 2 {
		t.Errorf("last hash in shard %d", got)
	}
}

func TestSelectorMergesAdjacentShards(t *testing.T) {
	s, _ := NewSpace(4)
	got := s.Selector([]int{3, 0, 1}).String()
	want := "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000') || " +
		"shardRange(object.metadata.namespace, '0xc000000000000000', '0x10000000000000000')"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if s.Selector(nil) != nil {
		t.Error("no shard owned must ask for nothing, not everything")
	}
}

// Every shard has exactly one member, the members' shares differ by one at most, and a new
// member takes a share.
func TestAssign(t *testing.T) {
	s, _ := NewSpace(12)
	for _, members := range [][]string{{"a"}, {"a", "b", "c"}, {"c", "a", "b", "d"}, {"a", "b", "c", "d", "e"}} {
		owner := map[int]string{}
		least, most := 99, 0
		for _, m := range members {
			mine := Assign(s, members, m)
			least, most = min(least, len(mine)), max(most, len(mine))
			for _, i := range mine {
				if o, ok := owner[i]; ok {
					t.Fatalf("%v: shard %d owned by %s and %s", members, i, o, m)
				}
				owner[i] = m
			}
		}
		if len(owner) != 12 || most-least > 1 {
			t.Errorf("%v: %d shards owned, shares from %d to %d", members, len(owner), least, most)
		}
	}
	if got := Assign(s, []string{"a", "b"}, "c"); len(got) != 4 {
		t.Errorf("a member not yet seen in the list counts itself: %v", got)
	}
}
