// Package shard splits the namespaces among reloader replicas: a fixed number of shards, each
// an equal slice of the 64-bit FNV-1a hash space of the namespace name (the hash the API
// server's shardSelector uses, KEP-5866), owned through one Lease each.
package shard

import (
	"fmt"
	"math/bits"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/sharding"
)

// Key is the field the shards hash, in the API server's shardSelector syntax.
const Key = "object.metadata.namespace"

// MaxShards bounds --shards: each owned shard is one Lease renewed every retry period.
const MaxShards = 256

// Space is the hash space cut into n shards of equal width.
type Space struct{ n int }

// NewSpace returns the space of n shards, 1 ≤ n ≤ MaxShards.
func NewSpace(n int) (Space, error) {
	if n < 1 || n > MaxShards {
		return Space{}, fmt.Errorf("%d shards: want 1 to %d", n, MaxShards)
	}
	return Space{n: n}, nil
}

// Shards is the number of shards.
func (s Space) Shards() int { return s.n }

// start is where shard i begins: floor(i·2⁶⁴/n), for 0 ≤ i < n.
func (s Space) start(i int) uint64 {
	q, _ := bits.Div64(uint64(i), 0, uint64(s.n))
	return q
}

// Hash is the namespace's place in the hash space, computed by the same function the API
// server applies, so the client-side filter and the server agree object for object.
func Hash(namespace string) uint64 {
	h, _ := strconv.ParseUint(sharding.HashField(namespace), 16, 64)
	return h
}

// Of is the shard that holds namespace.
func (s Space) Of(namespace string) int { return s.ofHash(Hash(namespace)) }

func (s Space) ofHash(h uint64) int {
	i, _ := bits.Mul64(h, uint64(s.n)) // floor(h·n/2⁶⁴): i or one below the answer
	if int(i)+1 < s.n && h >= s.start(int(i)+1) {
		i++
	}
	return int(i)
}

// Selector is the shardSelector of the shards owned, adjacent ones merged into one range;
// nil when none is owned (the server reads an empty selector as "everything").
func (s Space) Selector(owned []int) sharding.Selector {
	owned = slices.Sorted(slices.Values(owned))
	var reqs []sharding.ShardRangeRequirement
	for k := 0; k < len(owned); {
		first := owned[k]
		for k+1 < len(owned) && owned[k+1] == owned[k]+1 {
			k++
		}
		reqs = append(reqs, sharding.ShardRangeRequirement{Key: Key, Start: hex(s.start(first)), End: s.end(owned[k])})
		k++
	}
	if len(reqs) == 0 {
		return nil
	}
	return sharding.NewSelector(reqs...)
}

// end is where shard i ends, exclusive, as the server writes it: 2⁶⁴ for the last shard.
func (s Space) end(i int) string {
	if i == s.n-1 {
		return "0x10000000000000000"
	}
	return hex(s.start(i + 1))
}

func hex(v uint64) string { return fmt.Sprintf("0x%016x", v) }
