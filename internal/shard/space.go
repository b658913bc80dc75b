// Package shard splits the namespaces among reloader replicas: a fixed number of shards, each
// owned through one Lease. A namespace's shard comes from the 64-bit FNV-1a hash of its name,
// the hash the API server's shardSelector uses (KEP-5866), mixed first: FNV-1a keeps names
// that differ in their last characters (team-1, team-2, ...) within a narrow band of the hash
// space, so equal ranges of the raw hash would put them all in one shard. The API server is
// then asked for the raw-hash point of each owned namespace (see Filter).
package shard

import (
	"fmt"
	"math"
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
func (s Space) Of(namespace string) int { return s.ofHash(mix(Hash(namespace))) }

// mix spreads every bit of h over all the others (splitmix64's finalizer), a bijection.
func mix(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	return h ^ h>>31
}

func (s Space) ofHash(h uint64) int {
	i, _ := bits.Mul64(h, uint64(s.n)) // floor(h·n/2⁶⁴): i or one below the answer
	if int(i)+1 < s.n && h >= s.start(int(i)+1) {
		i++
	}
	return int(i)
}

// Selector asks the API server for the objects of the given namespaces: one range a point
// wide, at each namespace's raw hash; nil for no namespace (the server reads an empty
// selector as "everything").
func Selector(namespaces []string) sharding.Selector {
	points := make([]uint64, 0, len(namespaces))
	for _, ns := range namespaces {
		points = append(points, Hash(ns))
	}
	slices.Sort(points)
	points = slices.Compact(points)
	var reqs []sharding.ShardRangeRequirement
	for _, p := range points {
		end := "0x10000000000000000"
		if p != math.MaxUint64 {
			end = hex(p + 1)
		}
		reqs = append(reqs, sharding.ShardRangeRequirement{Key: Key, Start: hex(p), End: end})
	}
	if len(reqs) == 0 {
		return nil
	}
	return sharding.NewSelector(reqs...)
}

func hex(v uint64) string { return fmt.Sprintf("0x%016x", v) }
