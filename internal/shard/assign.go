package shard

import "slices"

// Assign returns the shards of self among members: sorted by identity, member k owns the
// shards i with i mod len(members) = k, so each holds n/len(members), give or take one.
// self counts as a member even before its own Lease is seen.
func Assign(s Space, members []string, self string) []int {
	all := slices.Clone(members)
	if !slices.Contains(all, self) {
		all = append(all, self)
	}
	slices.Sort(all)
	all = slices.Compact(all)
	k := slices.Index(all, self)
	var mine []int
	for i := k; i < s.n; i += len(all) {
		mine = append(mine, i)
	}
	return mine
}
