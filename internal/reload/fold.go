package reload

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/reloader-operator/reloader/internal/source"
)

// MaxRecordBytes bounds the record annotation. The API server refuses an object whose
// annotations together pass 256 KiB, so a record over thousands of sources (a ".*" rule)
// would make every patch of the workload fail. Past this size the record is folded: each
// source goes into one of recordBuckets buckets by its name, and a bucket keeps two 64-bit
// sums, of its members' names and of their names with hashes. A folded record is at most
// recordBuckets * 42 bytes (about 21 KiB), whatever the number of sources.
//
// What a folded record can tell, per bucket:
//   - nothing changed: both sums equal;
//   - contents changed, members the same: the names sum equal. Every member is reloaded
//     (with few sources per bucket, a few env vars more than the one that changed);
//   - one source newly there (created, or newly concerning): found by its name sum, recorded
//     without reload; other members' changes are still seen;
//   - otherwise (a source gone, several new at once): it can't tell a change from a departure,
//     so it reloads every member rather than miss a change.
//
// SecretProviderClass entries stay exact: their hashes are sets of versions compared as sets
// (see covered). Sources that do not exist are not members; --reload-on-create and
// --reload-on-delete need the exact record, and a folded record treats their sources as
// coming and going.
const MaxRecordBytes = 32 << 10

const (
	recordBuckets = 512
	bucketPrefix  = "~"
)

// folded reports whether the record holds bucket digests.
func (r Record) folded() bool {
	for k := range r {
		if strings.HasPrefix(k, bucketPrefix) {
			return true
		}
	}
	return false
}

// bucketSums are one bucket's sums: of member names, and of names with hashes.
type bucketSums struct{ names, contents uint64 }

func (b bucketSums) String() string { return fmt.Sprintf("%016x.%016x", b.names, b.contents) }

func parseSums(v string) (bucketSums, bool) {
	n, c, ok := strings.Cut(v, ".")
	names, err1 := strconv.ParseUint(n, 16, 64)
	contents, err2 := strconv.ParseUint(c, 16, 64)
	return bucketSums{names, contents}, ok && err1 == nil && err2 == nil
}

func digest(parts ...string) uint64 {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return binary.BigEndian.Uint64(h.Sum(nil))
}

func bucketOf(key string) string {
	return bucketPrefix + strconv.FormatUint(digest(key)%recordBuckets, 10)
}

// exact reports whether a source is kept exact in a folded record.
func exact(key string) bool { return strings.HasPrefix(key, string(source.SecretProviderClass)+"/") }

// fold returns the record's folded form.
func (r Record) fold() Record {
	sums := map[string]bucketSums{}
	out := Record{}
	for k, h := range r {
		switch {
		case exact(k):
			out[k] = h
		case h != Absent:
			b := sums[bucketOf(k)]
			b.names += digest(k)
			b.contents += digest(k, h)
			sums[bucketOf(k)] = b
		}
	}
	for k, b := range sums {
		out[k] = b.String()
	}
	return out
}

// diffFolded is Diff against a folded record; see MaxRecordBytes for what it can tell.
func diffFolded(last Record, current map[source.ID]string, ev Events) (changed []source.ID, next Record) {
	next = make(Record, len(current))
	members := map[string][]source.ID{}
	exactNow := map[source.ID]string{}
	for id, h := range current {
		key := id.String()
		next[key] = h
		switch {
		case exact(key):
			exactNow[id] = h
		case h != Absent:
			members[bucketOf(key)] = append(members[bucketOf(key)], id)
		}
	}
	exactLast := Record{}
	for k, v := range last {
		if exact(k) {
			exactLast[k] = v
		}
	}
	changed, exactNext := Diff(exactLast, true, exactNow, ev)
	for k, v := range exactNext {
		next[k] = v
	}
	for b, ids := range members {
		old, ok := parseSums(last[b])
		if !ok {
			continue // no member before: all new, recorded only
		}
		var now bucketSums
		for _, id := range ids {
			now.names += digest(id.String())
			now.contents += digest(id.String(), current[id])
		}
		switch {
		case now == old:
		case now.names == old.names:
			changed = append(changed, ids...)
		default:
			changed = append(changed, changedBesidesOneNew(ids, current, now, old)...)
		}
	}
	slices.SortFunc(changed, source.CompareIDs)
	return changed, next
}

// changedBesidesOneNew handles a bucket whose members differ: if exactly one member is new,
// the others are compared through the sums without it; otherwise every member reloads.
func changedBesidesOneNew(ids []source.ID, current map[source.ID]string, now, old bucketSums) []source.ID {
	for i, id := range ids {
		if now.names-digest(id.String()) != old.names {
			continue
		}
		if now.contents-digest(id.String(), current[id]) == old.contents {
			return nil
		}
		return append(slices.Clone(ids[:i]), ids[i+1:]...)
	}
	return ids
}
