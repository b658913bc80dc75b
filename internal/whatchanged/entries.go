package whatchanged

import (
	"encoding/binary"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// Skew is how far past the observer's clock a managedFields time is still believed: the
	// API server stamps entries with its own clock. A time further ahead was written by hand
	// (a "2999" entry would otherwise name its manager as the writer of every later change).
	Skew = time.Minute
	// MaxKept bounds the entries kept of a source's managedFields: the newest believable
	// ones, enough to find the entry a write changed beside entries written by hand.
	MaxKept = 3
	// entrySep separates the entries of a packed list; safe never lets it into a part.
	entrySep = ","
)

// Entry is one managedFields entry as kept: its writer (the time only when believable) and
// a digest of the entry as written (operation, API version, time, field set), which tells
// whether a write changed it.
type Entry struct {
	Writer
	State uint32
}

// Entries are the writers of a source's managedFields observed at now: at most maxEntries
// read, the MaxKept newest kept (undated and future-dated ones last), in their listed order.
func Entries(mf []metav1.ManagedFieldsEntry, now time.Time) []Entry {
	var out []Entry
	for i, e := range mf {
		if i == maxEntries {
			break
		}
		if w, ok := writerOf(e, now); ok {
			out = append(out, Entry{Writer: w, State: state(e)})
		}
	}
	if len(out) <= MaxKept {
		return out
	}
	// The cut-off time: the MaxKept-th newest; later-listed entries win ties, as in newest.
	order := make([]int, len(out))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if c := out[b].Time.Compare(out[a].Time); c != 0 {
			return c
		}
		return b - a
	})
	keep := make([]bool, len(out))
	for _, i := range order[:MaxKept] {
		keep[i] = true
	}
	kept := make([]Entry, 0, MaxKept)
	for i, e := range out {
		if keep[i] {
			kept = append(kept, e)
		}
	}
	return kept
}

// state digests what a write changes in an entry: its time and field set (and operation and
// API version, which a new write may change too).
func state(e metav1.ManagedFieldsEntry) uint32 {
	h := fnv.New32a()
	h.Write([]byte(e.Operation))
	h.Write([]byte{0})
	h.Write([]byte(e.APIVersion))
	h.Write([]byte{0})
	if e.Time != nil {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(e.Time.Unix()))
		h.Write(b[:])
	}
	if e.FieldsV1 != nil {
		h.Write(e.FieldsV1.Raw)
	}
	return h.Sum32()
}

// newest is the writer of the newest entry (by time; among entries of the same second, the
// last listed); ok is false for none.
func newest(entries []Entry) (w Writer, ok bool) {
	for _, e := range entries {
		if ok && e.Time.Before(w.Time) {
			continue
		}
		w, ok = e.Writer, true
	}
	return w, ok
}

// Pick is the writer of the write that turned a source's entries before into after: among
// the entries that write changed (an entry new, or whose state differs from the one of the
// same manager, operation and subresource before), the newest; the newest of after when no
// entry changed or before is unknown (nil). A changed entry dated before its own previous
// time, or, new, before every entry it found, is out of order, written by hand: its time is
// not believed, and the writer is reported without one.
func Pick(before, after []Entry) (Writer, bool) {
	if before == nil {
		return newest(after)
	}
	var changed []Entry
	for _, e := range after {
		if !slices.ContainsFunc(before, func(b Entry) bool { return b.sameEntry(e) && b.State == e.State }) {
			changed = append(changed, e)
		}
	}
	if len(changed) == 0 {
		return newest(after)
	}
	w, ok := newest(changed)
	prev, known := newest(before)
	if i := slices.IndexFunc(before, func(b Entry) bool { return b.sameEntry(Entry{Writer: w}) }); i >= 0 {
		prev, known = before[i].Writer, true
	}
	if known && w.Time.Before(prev.Time) {
		w.Time = time.Time{}
	}
	return w, ok
}

// sameEntry reports whether e and o are entries of the same manager, operation and
// subresource: the API server keeps one entry of each.
func (e Entry) sameEntry(o Entry) bool {
	return e.Manager == o.Manager && e.Operation == o.Operation && e.Subresource == o.Subresource
}

// Pack writes entries in one word for the cache: their Tokens, each followed by its state,
// comma-separated; "" for none.
func Pack(entries []Entry) string {
	var b strings.Builder
	for i, e := range entries {
		if i > 0 {
			b.WriteString(entrySep)
		}
		b.WriteString(e.Token())
		b.WriteString(tokenSep)
		b.WriteString(strconv.FormatUint(uint64(e.State), 16))
	}
	return b.String()
}

// Unpack reads Pack's word back; malformed entries are left out, at most MaxKept read. The
// writers' strings are substrings of s.
func Unpack(s string) []Entry {
	if s == "" {
		return nil
	}
	var out []Entry
	for part := range strings.SplitSeq(s, entrySep) {
		if len(out) == MaxKept {
			break
		}
		i := strings.LastIndex(part, tokenSep)
		if i < 0 {
			continue
		}
		w, ok := ParseToken(part[:i])
		st, err := strconv.ParseUint(part[i+1:], 16, 32)
		if !ok || err != nil {
			continue
		}
		out = append(out, Entry{Writer: w, State: uint32(st)})
	}
	return out
}

// NewestPacked is the newest writer of Pack's word.
func NewestPacked(s string) (Writer, bool) { return newest(Unpack(s)) }
