package shard

import (
	"hash/fnv"
	"slices"
)

// Assign returns the shards of self among members. Every replica computes it alike from the
// same list, whatever its order. self counts as a member even before its own Lease is seen.
//
// The assignment is rendezvous (highest-random-weight) hashing with bounded load: each
// member weighs each shard by a hash of the pair, and the shards, walked in order, go each
// to the heaviest member not yet full. A member is full at n/m+1 shards, or at n/m once the
// n mod m members allowed the extra one have it, so every member holds n/m or n/m+1.
// Without the bound a member joining would take exactly the shards it weighs heaviest and a
// member leaving would hand over exactly its own; the bound moves a few more, of the order
// of √(n·m), to even out the shares the others gained or lost (TestAssignMovesFewShards).
// Assigning by index modulo the member count instead moved most shards at every change.
func Assign(s Space, members []string, self string) []int {
	all := slices.Clone(members)
	if !slices.Contains(all, self) {
		all = append(all, self)
	}
	slices.Sort(all)
	all = slices.Compact(all)
	var mine []int
	for i, k := range owners(s.n, all) {
		if all[k] == self {
			mine = append(mine, i)
		}
	}
	return mine
}

// owners returns, for each of n shards, the index of its owner among members (sorted,
// distinct, at least one). Equal weights, as good as impossible, go to the first in order.
func owners(n int, members []string) []int {
	m := len(members)
	share, extra := n/m, n%m
	seeds := make([]uint64, m)
	for k, id := range members {
		h := fnv.New64a()
		h.Write([]byte(id))
		seeds[k] = mix(h.Sum64())
	}
	held := make([]int, m)
	withExtra := 0
	out := make([]int, n)
	for i := range n {
		best, top := -1, uint64(0)
		for k := range members {
			if held[k] > share || held[k] == share && withExtra == extra {
				continue // full
			}
			// mix(i) first: with seed^i alone, two seeds one bit apart would swap weights.
			if w := mix(seeds[k] ^ mix(uint64(i))); best < 0 || w > top {
				best, top = k, w
			}
		}
		out[i] = best
		held[best]++
		if held[best] == share+1 {
			withExtra++
		}
	}
	return out
}
