package hash

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
)

// Versions summarises the object versions a Secrets Store CSI mount reports ("id=version"
// pairs, from any number of pods) as a sorted, comma-separated set of short digests.
func Versions(pairs []string) string {
	set := make([]string, 0, len(pairs))
	for _, p := range pairs {
		sum := sha256.Sum256([]byte(p))
		set = append(set, hex.EncodeToString(sum[:8]))
	}
	slices.Sort(set)
	return strings.Join(slices.Compact(set), ",")
}

// VersionsCovered reports whether every version in current was already in applied. Each pod
// reports its own mount, and during a rotation pods disagree; only a version never applied
// before is a change.
func VersionsCovered(applied, current string) bool {
	have := strings.Split(applied, ",")
	for _, v := range strings.Split(current, ",") {
		if v != "" && !slices.Contains(have, v) {
			return false
		}
	}
	return true
}
