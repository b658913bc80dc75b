// Package whatchanged tells what one change of a source was, for people: the names of the
// keys added, removed and changed (never their values), and who wrote it, read from the
// source's managedFields. Both are reported only; no decision reads them.
package whatchanged

import (
	"fmt"
	"slices"
	"strings"
)

// MaxNamed bounds the key names kept and shown per list (added, removed, changed); the
// others are counted ("and 3 more"). Key names are at most 253 bytes (the API server's
// limit), so a change names at most 3*MaxNamed*253 bytes, whatever the source's size.
const MaxNamed = 10

// Keys are the key names of one change, each list sorted and holding at most MaxNamed
// names; the counts include the names left out.
type Keys struct {
	Added, Removed, Changed    []string
	NAdded, NRemoved, NChanged int
}

// Diff compares the per-key digests of a source before and after a change (hash.ConfigMapKeys,
// hash.SecretKeys: digests, never values). When only is not nil, keys outside it are left
// out: a workload that reads some keys only is told of those.
func Diff(before, after map[string]string, only []string) Keys {
	var k Keys
	in := func(key string) bool { return only == nil || slices.Contains(only, key) }
	for key, d := range after {
		if !in(key) {
			continue
		}
		old, ok := before[key]
		switch {
		case !ok:
			k.Added = append(k.Added, key)
		case old != d:
			k.Changed = append(k.Changed, key)
		}
	}
	for key := range before {
		if _, ok := after[key]; !ok && in(key) {
			k.Removed = append(k.Removed, key)
		}
	}
	k.Added, k.NAdded = bound(k.Added)
	k.Removed, k.NRemoved = bound(k.Removed)
	k.Changed, k.NChanged = bound(k.Changed)
	return k
}

// bound sorts names and keeps the first MaxNamed, in a slice of their size.
func bound(names []string) ([]string, int) {
	n := len(names)
	if n == 0 {
		return nil, 0
	}
	slices.Sort(names)
	return slices.Clip(names[:min(n, MaxNamed)]), n
}

// Empty reports whether no key is named: no change of keys, or none known.
func (k Keys) Empty() bool { return k.NAdded+k.NRemoved+k.NChanged == 0 }

// String names the keys for people: "keys changed: A, B; added: C; removed: D and 3 more".
func (k Keys) String() string {
	var parts []string
	for _, l := range []struct {
		what  string
		names []string
		n     int
	}{{"changed", k.Changed, k.NChanged}, {"added", k.Added, k.NAdded}, {"removed", k.Removed, k.NRemoved}} {
		if l.n == 0 {
			continue
		}
		s := l.what + ": " + strings.Join(l.names, ", ")
		if more := l.n - len(l.names); more > 0 {
			s += fmt.Sprintf(" and %d more", more)
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return ""
	}
	return "keys " + strings.Join(parts, "; ")
}
