// Package flap is the flap breaker: it watches each source's content changes, and quarantines
// a source that changes too often, oscillates between contents, or is written alternately by
// different field managers, so that the reloads it would cause stop until it is quiet (then
// the workloads reload once, on its latest content) or an operator releases it. Pure: the
// controller feeds it changes and asks it, at the point where a reload is decided, whether a
// source is quarantined.
package flap

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/reloader-operator/reloader/internal/whatchanged"
)

// Limits are when a source is quarantined, and for how long.
type Limits struct {
	// MaxChanges: more bursts of changes than this within Window quarantine a source; 0 turns
	// the breaker off (for a source, through its annotation; for all, through the flag).
	MaxChanges int
	// Window is how far back changes count.
	Window time.Duration
	// Quiet is how long a quarantined source must go without change before its workloads
	// reload, once, on its latest content.
	Quiet time.Duration
}

// Defaults are the limits when no flag sets them: a change every two minutes for a quarter of
// an hour is already more than an ordinary release makes, and a burst (changes less than
// Burst apart, as a CI job or a Helm upgrade writes them) counts once. The patterns need more
// than a revert: three returns to an earlier content, four switches of writer.
func Defaults() Limits {
	return Limits{MaxChanges: 8, Window: 15 * time.Minute, Quiet: 5 * time.Minute}
}

const (
	// Burst: changes closer than this to the one before count as one for MaxChanges (the
	// patterns count every change).
	Burst = 10 * time.Second
	// MinReturns: this many changes back to a content the source had within the window
	// (A->B->A->B->A) is an oscillation; one revert, or a revert of a revert, is not.
	MinReturns = 3
	// MinSwitches: this many changes in a row by another field manager than the change
	// before (a->b->a->b->a) is a fight between writers.
	MinSwitches = 4
	// maxHistory bounds the changes kept per source.
	maxHistory = 64
	// maxWriters bounds the writers a quarantine names.
	maxWriters = 4
	// MinDuration and MaxDuration bound the window and quiet periods, from flags and
	// annotations alike.
	MinDuration = time.Second
	MaxDuration = 24 * time.Hour
	// MaxMaxChanges bounds MaxChanges.
	MaxMaxChanges = 1000
)

// What a quarantine saw: the values of Quarantine.Seen.
const (
	SeenTooOften    = "too-often"
	SeenOscillating = "oscillating"
	SeenAlternating = "alternating-writers"
)

// Validate reports limits out of bounds.
func (l Limits) Validate() error {
	switch {
	case l.MaxChanges < 0 || l.MaxChanges > MaxMaxChanges:
		return fmt.Errorf("max changes %d is not from 0 (off) to %d", l.MaxChanges, MaxMaxChanges)
	case l.Window < MinDuration || l.Window > MaxDuration:
		return fmt.Errorf("window %v is not from %v to %v", l.Window, MinDuration, MaxDuration)
	case l.Quiet < MinDuration || l.Quiet > MaxDuration:
		return fmt.Errorf("quiet %v is not from %v to %v", l.Quiet, MinDuration, MaxDuration)
	}
	return nil
}

// Change is one change of a source's content, as the controller heard it.
type Change struct {
	// At is when it was heard.
	At time.Time
	// Version is the object's resourceVersion: the same change heard twice (each workload
	// controller's watch hears it) counts once.
	Version  string
	From, To string
	// Writer is the newest writer from the object's managedFields; Manager "" when unknown.
	Writer whatchanged.Writer
}

// Quarantine is a source's quarantine: since when, what was seen and who wrote it.
type Quarantine struct {
	Since time.Time
	// Last is the time of the latest change; the source is released at Last+Quiet.
	Last  time.Time
	Quiet time.Duration
	// Seen lists what tripped the breaker (SeenTooOften, ...), Changes, Returns and Switches
	// what was counted within the window then.
	Seen                       []string
	Changes, Returns, Switches int
	Window                     time.Duration
	// Writers are the field managers of the changes counted, newest write of each, oldest
	// first; at most maxWriters.
	Writers []whatchanged.Writer
}

// Until is when the quarantine ends, if no other change comes.
func (q Quarantine) Until() time.Time { return q.Last.Add(q.Quiet) }

// What says what was seen, for Events, alerts and explain: "12 changes in 3m0s; content
// returned to an earlier state 5 times; written alternately (4 switches) by field managers a
// (Update at ...), b (Update at ...) (reported by the API server)".
func (q Quarantine) What() string {
	var parts []string
	if len(q.Seen) > 0 {
		parts = append(parts, fmt.Sprintf("%d changes within %v", q.Changes, q.Window))
	}
	if slices.Contains(q.Seen, SeenOscillating) {
		parts = append(parts, fmt.Sprintf("content returned to an earlier state %d times", q.Returns))
	}
	if len(q.Writers) > 0 {
		ws := make([]string, len(q.Writers))
		for i, w := range q.Writers {
			ws[i] = w.Short()
		}
		how := "written by "
		if slices.Contains(q.Seen, SeenAlternating) {
			how = fmt.Sprintf("written alternately (%d switches) by ", q.Switches)
		}
		parts = append(parts, how+"field managers "+strings.Join(ws, ", ")+" ("+whatchanged.ReportedBy+")")
	}
	return strings.Join(parts, "; ")
}

// entry is a Change as a source's history keeps it: 40 bytes, fingerprints instead of the
// strings (a hash from the cache would keep the cache's whole packed string alive), so that a
// full table (4,096 sources of 64 changes) stays near 10 MiB.
type entry struct {
	at                int64 // unix nanoseconds
	from, to, version uint64
	manager           uint32 // 0: unknown
}

// fingerprint is a 64-bit FNV-1a of s; collisions cost at most a miscount.
func fingerprint(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

func toEntry(c Change) entry {
	e := entry{at: c.At.UnixNano(), from: fingerprint(c.From), to: fingerprint(c.To), version: fingerprint(c.Version)}
	if c.Writer.Manager != "" {
		e.manager = uint32(fingerprint(c.Writer.Manager)) | 1
	}
	return e
}

// state is what is kept of one source.
type state struct {
	changes []entry
	// writers are the managers of the changes kept, newest write of each (addWriter).
	writers []whatchanged.Writer
	q       *Quarantine
	limits  Limits
	// released is the time an operator's release named: a quarantine that began at or before
	// it is over.
	released time.Time
	// last is the time of the latest change, for the table's eviction.
	last time.Time
}

// observe adds c to s and reports whether it began a quarantine.
func (s *state) observe(c Change) bool {
	if c.From == c.To {
		return false
	}
	e := toEntry(c)
	for _, h := range s.changes {
		if c.Version != "" && h.version == e.version {
			return false
		}
	}
	s.last = c.At
	s.changes = slices.DeleteFunc(s.changes, func(h entry) bool { return time.Duration(e.at-h.at) > s.limits.Window })
	if len(s.changes) == maxHistory {
		s.changes = slices.Delete(s.changes, 0, 1)
	}
	s.changes = append(s.changes, e)
	s.writers = slices.DeleteFunc(s.writers, func(w whatchanged.Writer) bool {
		return !w.Time.IsZero() && c.At.Sub(w.Time) > s.limits.Window
	})
	s.writers = addWriter(s.writers, c.Writer)
	q := assess(s.changes, s.limits)
	q.Writers = slices.Clone(s.writers)
	if s.q != nil {
		// Still in quarantine: what it saw grows, its start stays.
		q.Since, q.Last = s.q.Since, c.At
		for _, seen := range s.q.Seen {
			if !slices.Contains(q.Seen, seen) {
				q.Seen = append(q.Seen, seen)
			}
		}
		*s.q = q
		return false
	}
	if s.limits.MaxChanges == 0 {
		return false
	}
	if len(q.Seen) == 0 {
		return false
	}
	q.Since, q.Last = c.At, c.At
	s.q = &q
	return true
}

// assess counts, in changes (oldest first, all within the window), the bursts, the returns to
// an earlier content and the switches of writer, and names what exceeds limits.
func assess(changes []entry, l Limits) Quarantine {
	q := Quarantine{Quiet: l.Quiet, Window: l.Window, Changes: len(changes)}
	bursts := 0
	states := make(map[uint64]bool, len(changes)+1)
	for i, c := range changes {
		if i == 0 || time.Duration(c.at-changes[i-1].at) >= Burst {
			bursts++
		}
		if i == 0 || changes[i-1].to != c.from {
			// The first state, or a change not heard (a gap): a state the source had too.
			states[c.from] = true
		}
		if states[c.to] {
			q.Returns++
		}
		states[c.to] = true
		if i > 0 && c.manager != 0 && changes[i-1].manager != 0 && c.manager != changes[i-1].manager {
			q.Switches++
		}
	}
	if bursts > l.MaxChanges {
		q.Seen = append(q.Seen, SeenTooOften)
	}
	if q.Returns >= MinReturns {
		q.Seen = append(q.Seen, SeenOscillating)
	}
	if q.Switches >= MinSwitches {
		q.Seen = append(q.Seen, SeenAlternating)
	}
	return q
}

// addWriter puts w among ws as the newest write of its manager (moved to the end); the
// oldest goes past maxWriters.
func addWriter(ws []whatchanged.Writer, w whatchanged.Writer) []whatchanged.Writer {
	if w.Manager == "" {
		return ws
	}
	ws = slices.DeleteFunc(ws, func(o whatchanged.Writer) bool { return o.Manager == w.Manager })
	if len(ws) == maxWriters {
		ws = slices.Delete(ws, 0, 1)
	}
	return append(ws, w)
}

// status is the quarantine in force at now; one that has been quiet long enough ends, and the
// changes before it are forgotten (they were answered by the reload that follows).
func (s *state) status(now time.Time) (Quarantine, bool) {
	if s.q == nil {
		return Quarantine{}, false
	}
	if !now.Before(s.q.Until()) || (!s.released.IsZero() && !s.released.Before(s.q.Since.Truncate(time.Second))) {
		s.q, s.changes, s.writers = nil, nil, nil
		return Quarantine{}, false
	}
	return *s.q, true
}
