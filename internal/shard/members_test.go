package shard

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A member is alive while this replica sees its Lease renewed within the lease duration,
// whatever its clock wrote, and stale after three durations unrenewed.
func TestLivenessByRenewalsSeen(t *testing.T) {
	l := newLiveness(10 * time.Second)
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	lease := func(name, holder string, renewed time.Time) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), RenewTime: &metav1.MicroTime{Time: renewed}}}
	}
	// b's clock is an hour behind: its renewals still count, as seen here.
	a, b := lease("m-a", "a", t0), lease("m-b", "b", t0.Add(-time.Hour))
	if alive, _ := l.observe([]*coordinationv1.Lease{a, b}, t0); len(alive) != 2 {
		t.Fatalf("alive %v, want a and b", alive)
	}
	a2 := lease("m-a", "a", t0.Add(8*time.Second))
	alive, stale := l.observe([]*coordinationv1.Lease{a2, b}, t0.Add(12*time.Second))
	if len(alive) != 1 || alive[0] != "a" || len(stale) != 0 {
		t.Fatalf("after b's silence of 12s: alive %v, stale %d", alive, len(stale))
	}
	a3 := lease("m-a", "a", t0.Add(30*time.Second))
	if _, stale := l.observe([]*coordinationv1.Lease{a3, b}, t0.Add(31*time.Second)); len(stale) != 1 || stale[0].Name != "m-b" {
		t.Fatalf("after 31s: stale %v, want m-b", stale)
	}
}
