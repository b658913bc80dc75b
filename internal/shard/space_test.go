package shard

import (
	"fmt"
	"math"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apisharding "k8s.io/apiserver/pkg/sharding"

	"github.com/reloader-operator/reloader/internal/testutil"
)

// The API server, parsing the selector as it does, matches exactly the namespaces named.
func TestSelectorNamesNamespacesAsTheServerReadsIt(t *testing.T) {
	named := []string{"team-1", "team-2", "payments", "kube-system"}
	sel, err := apisharding.Parse(Selector(named).String())
	if err != nil {
		t.Fatalf("the server refuses %q: %v", Selector(named).String(), err)
	}
	for k := range 200 {
		for _, ns := range []string{fmt.Sprintf("team-%d", k), "payments", "kube-system", "default"} {
			got, err := sel.Matches(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x"}})
			testutil.Must(t, err)
			if want := slices.Contains(named, ns); got != want {
				t.Fatalf("%s: the server's selector matches %v, want %v", ns, got, want)
			}
		}
	}
	if Selector(nil) != nil {
		t.Error("no namespace must ask for nothing, not everything")
	}
}

// Names that differ in their last characters, which FNV-1a alone keeps in one narrow band,
// spread over the shards.
func TestSimilarNamesSpread(t *testing.T) {
	s, _ := NewSpace(12)
	members := []string{"a", "b", "c"}
	per := map[string]int{}
	shards := map[int]int{}
	for k := range 30 {
		i := s.Of(fmt.Sprintf("team-%d", k))
		shards[i]++
		for _, m := range members {
			if slices.Contains(Assign(s, members, m), i) {
				per[m]++
			}
		}
	}
	t.Logf("30 namespaces: %d shards used; per member %v", len(shards), per)
	for _, m := range members {
		if per[m] < 5 || per[m] > 15 {
			t.Errorf("member %s owns %d of 30 namespaces", m, per[m])
		}
	}
}

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
	if _, err := NewSpace(0); err == nil {
		t.Error("0 shards accepted")
	}
	if _, err := NewSpace(MaxShards + 1); err == nil {
		t.Error("too many shards accepted")
	}
}
