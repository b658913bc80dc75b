package flap

import (
	"crypto/hmac"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/reloader-operator/reloader/internal/hash"
)

// Annotations. The limits and the release are on the source, written by whoever may write it:
// input, never a record of what reloader did. The record of a quarantine is on the workloads,
// under a MAC (RecordAnnotation).
const (
	// MaxChangesAnnotation, WindowAnnotation and QuietAnnotation set a source's limits (0
	// changes turns the breaker off for it).
	MaxChangesAnnotation = "reloader.dev/flap-max-changes"
	WindowAnnotation     = "reloader.dev/flap-window"
	QuietAnnotation      = "reloader.dev/flap-quiet"
	// ReleaseAnnotation on a source asks that its quarantine end: its value is a time
	// (RFC 3339), and only a quarantine that began at or before it ends, so that a release
	// left on the source never releases a later flap. `kubectl reloader release` writes the
	// time of now.
	ReleaseAnnotation = "reloader.dev/release-quarantine"
	// RecordAnnotation on a workload holds the quarantines that hold its reloads, with a MAC
	// under the install key, so that they outlive a restart (Seal, Open).
	RecordAnnotation = "reloader.dev/quarantine"
	// HoldReason is the reason of a reload held by a quarantine (reload.Hold.Reason, the
	// reason label of reloader_reloads_waiting and reloader_reloads_held_total).
	HoldReason = "quarantine"
)

// maxAnnotation bounds an annotation value read: the longest valid one is far shorter.
const maxAnnotation = 64

// ParseLimits reads a source's limit annotations over defaults; a bad value is reported and
// its default kept.
func ParseLimits(ann map[string]string, defaults Limits) (Limits, []error) {
	l := defaults
	var errs []error
	if v, ok := ann[MaxChangesAnnotation]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if len(v) > maxAnnotation || err != nil || n < 0 || n > MaxMaxChanges {
			errs = append(errs, fmt.Errorf("annotation %s: %q is not a number from 0 (off) to %d; using %d", MaxChangesAnnotation, clip(v), MaxMaxChanges, defaults.MaxChanges))
		} else {
			l.MaxChanges = n
		}
	}
	for _, d := range []struct {
		key string
		to  *time.Duration
		def time.Duration
	}{{WindowAnnotation, &l.Window, defaults.Window}, {QuietAnnotation, &l.Quiet, defaults.Quiet}} {
		v, ok := ann[d.key]
		if !ok {
			continue
		}
		p, err := ParseDuration(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("annotation %s: %w; using %v", d.key, err, d.def))
			continue
		}
		*d.to = p
	}
	return l, errs
}

// ParseDuration reads a window or quiet period: a Go duration from MinDuration to MaxDuration.
func ParseDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if len(v) > maxAnnotation || err != nil || d < MinDuration || d > MaxDuration {
		return 0, fmt.Errorf("%q is not a duration from %v to %v, such as 10m", clip(v), MinDuration, MaxDuration)
	}
	return d, nil
}

// releaseSkew is how far in the future a release may name: clocks differ a little.
const releaseSkew = 2 * time.Minute

// ParseRelease reads a release annotation: a time (RFC 3339) not later than now (give or take
// releaseSkew).
func ParseRelease(v string, now time.Time) (time.Time, error) {
	if len(v) > maxAnnotation {
		return time.Time{}, fmt.Errorf("annotation %s: %d bytes is too long for a time", ReleaseAnnotation, len(v))
	}
	at, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
	if err != nil {
		return time.Time{}, fmt.Errorf("annotation %s: %q is not a time such as %s", ReleaseAnnotation, clip(v), now.UTC().Format(time.RFC3339))
	}
	if at.After(now.Add(releaseSkew)) {
		return time.Time{}, fmt.Errorf("annotation %s: %s is in the future; a release names the time it was asked", ReleaseAnnotation, at.UTC().Format(time.RFC3339))
	}
	return at, nil
}

// Releases reports whether a release that names at ends a quarantine that began at since.
func Releases(at, since time.Time) bool {
	return !at.Before(since.Truncate(time.Second))
}

func clip(v string) string {
	if len(v) > maxAnnotation {
		return v[:maxAnnotation] + "..."
	}
	return v
}

// Entry is one quarantine as a workload's record keeps it.
type Entry struct {
	// Source is the source's ID (source.ID.String(): "secret/creds").
	Source      string
	Since, Last time.Time
	Quiet       time.Duration
	// Seen is what tripped the breaker (SeenTooOften, ...).
	Seen []string
}

const (
	// recordVersion starts every record, so that a later form is told apart.
	recordVersion = "v1"
	// MaxEntries bounds the quarantines one record keeps (a workload's sources in quarantine
	// at once); MaxRecord bounds the annotation read.
	MaxEntries = 16
	MaxRecord  = 4 << 10
	macSep     = ";mac="
	// macPurpose derives the records' sub-key from the install key (hash.Key.MAC).
	macPurpose = "quarantine-record"
)

var knownSeen = []string{SeenTooOften, SeenOscillating, SeenAlternating}

// Encode writes entries in one line: "v1 secret/creds 1764200000 1764200060 300 too-often+oscillating ...",
// sorted by source. Times are whole seconds.
func Encode(entries []Entry) string {
	es := slices.Clone(entries)
	slices.SortFunc(es, func(a, b Entry) int { return strings.Compare(a.Source, b.Source) })
	var b strings.Builder
	b.WriteString(recordVersion)
	for _, e := range es {
		seen := strings.Join(e.Seen, "+")
		if seen == "" {
			seen = "-"
		}
		fmt.Fprintf(&b, " %s %d %d %d %s", e.Source, e.Since.Unix(), e.Last.Unix(), int64(e.Quiet/time.Second), seen)
	}
	return b.String()
}

// Decode reads what Encode wrote; anything else is an error, and nothing of it is used.
func Decode(v string) ([]Entry, error) {
	if len(v) > MaxRecord {
		return nil, fmt.Errorf("record of %d bytes, over %d", len(v), MaxRecord)
	}
	f := strings.Split(v, " ")
	if f[0] != recordVersion || (len(f)-1)%5 != 0 {
		return nil, errors.New("not a quarantine record")
	}
	n := (len(f) - 1) / 5
	if n > MaxEntries {
		return nil, fmt.Errorf("%d quarantines, over %d", n, MaxEntries)
	}
	out := make([]Entry, 0, n)
	for i := range n {
		p := f[1+5*i : 6+5*i]
		since, err1 := unixField(p[1])
		last, err2 := unixField(p[2])
		quiet, err3 := strconv.ParseInt(p[3], 10, 64)
		if err := errors.Join(err1, err2, err3); err != nil || !validSource(p[0]) || last.Before(since) ||
			quiet < int64(MinDuration/time.Second) || quiet > int64(MaxDuration/time.Second) {
			return nil, fmt.Errorf("quarantine %d is malformed", i+1)
		}
		e := Entry{Source: p[0], Since: since, Last: last, Quiet: time.Duration(quiet) * time.Second}
		if p[4] != "-" {
			for s := range strings.SplitSeq(p[4], "+") {
				if !slices.Contains(knownSeen, s) || slices.Contains(e.Seen, s) {
					return nil, fmt.Errorf("quarantine %d is malformed", i+1)
				}
				e.Seen = append(e.Seen, s)
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// maxUnix bounds the times read (year 36812).
const maxUnix = 1 << 40

func unixField(s string) (time.Time, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > maxUnix {
		return time.Time{}, errors.New("bad time")
	}
	return time.Unix(n, 0).UTC(), nil
}

// validSource accepts "kind/name" with a lowercase kind and a name of the characters the API
// server admits in ConfigMap, Secret and SecretProviderClass names.
func validSource(s string) bool {
	kind, name, ok := strings.Cut(s, "/")
	if !ok || kind == "" || name == "" || len(s) > 300 {
		return false
	}
	for _, c := range []byte(kind) {
		if c < 'a' || c > 'z' {
			return false
		}
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// Subject names the workload a record is on: the MAC covers it, so that a record copied onto
// another workload (or onto the same one re-created: its UID differs) is refused.
type Subject struct {
	Kind, Namespace, Name, UID string
}

func mac(key hash.Key, s Subject, payload string) []byte {
	var msg []byte
	for _, f := range []string{s.Kind, s.Namespace, s.Name, s.UID, payload} {
		msg = binary.BigEndian.AppendUint64(msg, uint64(len(f)))
		msg = append(msg, f...)
	}
	return key.MAC(macPurpose, msg)
}

// Seal is the record's annotation value: Encode(entries) and its MAC under key; "" without a
// valid key (nothing is kept then but in memory).
func Seal(key hash.Key, s Subject, entries []Entry) string {
	if !key.Valid() {
		return ""
	}
	payload := Encode(entries)
	return payload + macSep + hex.EncodeToString(mac(key, s, payload))
}

// Open reads a record sealed for s under key; an error when it is malformed, or its MAC is
// not valid (someone else wrote it, or reloader under another key, or for another workload).
func Open(key hash.Key, s Subject, v string) ([]Entry, error) {
	if !key.Valid() {
		return nil, errors.New("no install key to check it with")
	}
	if len(v) > MaxRecord+len(macSep)+64 {
		return nil, fmt.Errorf("record of %d bytes is too long", len(v))
	}
	payload, sum, ok := strings.Cut(v, macSep)
	if !ok {
		return nil, errors.New("record has no MAC")
	}
	got, err := hex.DecodeString(sum)
	if err != nil || !hmac.Equal(got, mac(key, s, payload)) {
		return nil, errors.New("record's MAC is not valid: reloader did not write it for this workload")
	}
	return Decode(payload)
}

// Peek reads a record without checking its MAC: for display only (explain, which has no
// install key), never to decide.
func Peek(v string) ([]Entry, error) {
	payload, _, _ := strings.Cut(v, macSep)
	return Decode(payload)
}

// FromQuarantine is the record entry of q, a quarantine of source id.
func FromQuarantine(id string, q Quarantine) Entry {
	return Entry{Source: id, Since: q.Since.Truncate(time.Second), Last: q.Last.Truncate(time.Second), Quiet: q.Quiet, Seen: q.Seen}
}

// Quarantine is the quarantine e keeps (without its counts and writers).
func (e Entry) Quarantine() Quarantine {
	return Quarantine{Since: e.Since, Last: e.Last, Quiet: e.Quiet, Seen: e.Seen}
}
