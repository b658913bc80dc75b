package shard

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A member is alive until both its Lease's renewTime and the last renewal seen here are a
// lease duration old: a clock behind or ahead of this one never makes it look dead sooner.
// Dead two durations more, its Lease is stale.
func TestLivenessTakesTheLaterOfWrittenAndSeen(t *testing.T) {
	l := newLiveness(10 * time.Second)
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	lease := func(name, holder string, renewed time.Time) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), RenewTime: &metav1.MicroTime{Time: renewed},
				LeaseDurationSeconds: ptr.To(int32(10))}}
	}
	// b's clock is an hour behind, c's a minute ahead: their renewals count as seen here.
	a, b, c := lease("m-a", "a", t0), lease("m-b", "b", t0.Add(-time.Hour)), lease("m-c", "c", t0.Add(time.Minute))
	for _, x := range []*coordinationv1.Lease{a, b, c} {
		l.saw(x, t0)
	}
	if alive, _, next := l.members([]*coordinationv1.Lease{a, b, c}, t0); len(alive) != 3 || !next.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("alive %v, next expiry %v; want a, b, c and t0+10s", alive, next)
	}
	a2 := lease("m-a", "a", t0.Add(8*time.Second))
	l.saw(a2, t0.Add(8*time.Second))
	alive, stale, _ := l.members([]*coordinationv1.Lease{a2, b, c}, t0.Add(12*time.Second))
	if len(alive) != 2 || alive[0] != "a" || alive[1] != "c" || len(stale) != 0 {
		t.Fatalf("after 12s: alive %v, stale %d; want a and c (c's renewTime is ahead)", alive, len(stale))
	}
	// a unrenewed since t0+8s: expired at t0+18s exactly, not a lease after it was first seen.
	if alive, _, _ := l.members([]*coordinationv1.Lease{a2}, t0.Add(18*time.Second+time.Millisecond)); len(alive) != 0 {
		t.Fatalf("a alive at t0+18s: %v", alive)
	}
	a3 := lease("m-a", "a", t0.Add(30*time.Second))
	l.saw(a3, t0.Add(30*time.Second))
	if _, stale, _ := l.members([]*coordinationv1.Lease{a3, b}, t0.Add(31*time.Second)); len(stale) != 1 || stale[0].Name != "m-b" {
		t.Fatalf("after 31s: stale %v, want m-b", stale)
	}
}
