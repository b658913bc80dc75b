package shard

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// identities makes k replica identities as reloader names them (host_uuid), the same for
// the same seed.
func identities(seed uint64, k int) []string {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([]string, k)
	for j := range out {
		out[j] = fmt.Sprintf("reloader-%08x-%04x_%016x", rng.Uint32(), rng.Uint32N(1<<16), rng.Uint64())
	}
	return out
}

// owning computes the assignment as the coordinator does, each member for itself, and
// returns the owner of each shard; it fails if a shard has no owner or two.
func owning(t *testing.T, s Space, members []string) map[int]string {
	t.Helper()
	owner := map[int]string{}
	for _, m := range members {
		for _, i := range Assign(s, members, m) {
			if o, ok := owner[i]; ok {
				t.Fatalf("%d shards, %d members: shard %d owned by %s and %s", s.n, len(members), i, o, m)
			}
			owner[i] = m
		}
	}
	if len(owner) != s.n {
		t.Fatalf("%d shards, %d members: %d shards owned", s.n, len(members), len(owner))
	}
	return owner
}

// Every shard has exactly one owner and every member n/m or n/m+1 shards, for every number
// of shards and up to 12 members; the order of the list changes nothing.
func TestAssignBalanced(t *testing.T) {
	for n := 1; n <= MaxShards; n++ {
		s, _ := NewSpace(n)
		for m := 1; m <= 12; m++ {
			members := identities(uint64(n*100+m), m)
			owner := owning(t, s, members)
			held := map[string]int{}
			for _, o := range owner {
				held[o]++
			}
			for _, id := range members {
				if held[id] < n/m || held[id] > (n+m-1)/m {
					t.Fatalf("%d shards, %d members: %s holds %d", n, m, id, held[id])
				}
			}
			shuffled := slices.Clone(members)
			rand.New(rand.NewPCG(uint64(n), uint64(m))).Shuffle(m, func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
			for _, id := range members {
				if !slices.Equal(Assign(s, members, id), Assign(s, shuffled, id)) {
					t.Fatalf("%d shards: %s's shards depend on the order of the list", n, id)
				}
			}
		}
	}
}

// A member joining takes its share and few others move; a member leaving hands over its
// shards and few others move. Rendezvous hashing alone would move exactly those, but would
// leave each of the m members off its even share by a binomial spread of about √(n/m); the
// bound on load evens that out, moving about half the summed deviations, of the order of
// √(n·m): at most ⌈√(n·m)⌉ beyond the joiner's or leaver's shards here, m the members with
// the joiner or the leaver. (Assigning by index modulo the member count moved three
// quarters of the shards on a join from 3 to 4: 128 beyond the joiner's 64 of 256.)
func TestAssignMovesFewShards(t *testing.T) {
	moved := func(a, b map[int]string) int {
		k := 0
		for i := range a {
			if a[i] != b[i] {
				k++
			}
		}
		return k
	}
	worst := 0
	for n := 1; n <= MaxShards; n++ {
		s, _ := NewSpace(n)
		for trial := range 4 {
			for m := 1; m <= 8; m++ {
				bound := int(math.Ceil(math.Sqrt(float64(n * (m + 1)))))
				members := identities(uint64(n*1000+trial*10+m), m+1)
				before, after := owning(t, s, members[:m]), owning(t, s, members)
				joined := 0
				for _, o := range after {
					if o == members[m] {
						joined++
					}
				}
				if extra := moved(before, after) - joined; extra > bound {
					t.Errorf("%d shards, %d members and one joining: %d move, %d of them not to the new one (bound %d)", n, m, moved(before, after), extra, bound)
				} else {
					worst = max(worst, extra)
				}
				gone := members[trial%(m+1)]
				left := owning(t, s, slices.DeleteFunc(slices.Clone(members), func(id string) bool { return id == gone }))
				had := 0
				for _, o := range after {
					if o == gone {
						had++
					}
				}
				if extra := moved(after, left) - had; extra > bound {
					t.Errorf("%d shards, %d members and one leaving: %d move, %d of them not the leaver's (bound %d)", n, m+1, moved(after, left), extra, bound)
				}
			}
		}
	}
	t.Logf("at most %d shards moved beyond the joiner's", worst)
	// The e2e's case: 12 shards, a fourth replica joining three.
	s, _ := NewSpace(12)
	members := identities(7, 4)
	if got := moved(owning(t, s, members[:3]), owning(t, s, members)); got > 3+2 {
		t.Errorf("12 shards, a fourth member: %d move", got)
	}
}

func TestAssignCountsSelf(t *testing.T) {
	s, _ := NewSpace(12)
	if got := Assign(s, []string{"a", "b"}, "c"); len(got) != 4 {
		t.Errorf("a member not yet seen in the list counts itself: %v", got)
	}
	if got := Assign(s, []string{"a", "a", "b"}, "a"); len(got) != 6 {
		t.Errorf("a member listed twice counts once: %v", got)
	}
}
