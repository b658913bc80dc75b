package flap

import (
	"sync"
	"time"

	"github.com/reloader-operator/reloader/internal/fair"
)

// Key names a source.
type Key struct {
	Namespace, Kind, Name string
}

// Table is the breaker's memory of the sources that changed while reloader ran, shared by the
// workload controllers of one manager. It holds at most max sources, and max/4 of one
// namespace: a namespace that churns thousands of sources evicts its own, never another's
// (fair.Shares). Of the namespace that gives one up, the source whose latest change is oldest,
// and not in quarantine, goes first.
type Table struct {
	mu       sync.Mutex
	m        map[Key]*state
	shares   *fair.Shares[Key]
	defaults Limits
}

const defaultMaxSources = 4096

// namespaceShare is the part of the table one namespace may hold: 1/namespaceShare.
const namespaceShare = 4

// NewTable returns a table whose sources are judged by defaults (the flags) unless their
// annotations set other limits; max bounds the sources kept (a default when 0).
func NewTable(defaults Limits, max int) *Table {
	if max <= 0 {
		max = defaultMaxSources
	}
	return &Table{m: map[Key]*state{}, shares: fair.NewShares[Key](max, max/namespaceShare), defaults: defaults}
}

// Defaults are the limits of the flags.
func (t *Table) Defaults() Limits {
	if t == nil {
		return Limits{}
	}
	return t.defaults
}

// Observe adds a change of source k, whose annotations are ann (the per-source limits); it
// returns the quarantine when this change began one, and the annotations that could not be
// read (their defaults are used).
func (t *Table) Observe(k Key, c Change, ann map[string]string) (began *Quarantine, invalid []error) {
	if t == nil || t.defaults.MaxChanges == 0 {
		return nil, nil
	}
	limits, invalid := ParseLimits(ann, t.defaults)
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.m[k]
	if !ok {
		s = &state{}
		t.add(k, s)
	}
	s.limits = limits
	s.status(c.At) // a quarantine quiet for long enough ends before this change counts
	if s.observe(c) {
		q := *s.q
		return &q, invalid
	}
	return nil, invalid
}

// add keeps s as source k's, making room first when k's namespace or the table is full.
// Called with t.mu held.
func (t *Table) add(k Key, s *state) {
	if victim, crowded := t.shares.Crowded(k.Namespace); crowded {
		t.evict(t.shares.Keys(victim))
	}
	t.m[k] = s
	t.shares.Add(k.Namespace, k)
}

// evict drops, of the sources of one namespace, the one whose latest change is oldest,
// preferring one not in quarantine. A scan of that namespace's sources, only when full.
func (t *Table) evict(of map[Key]struct{}) {
	var oldest Key
	var at time.Time
	found, quarantined := false, true
	for k := range of {
		s := t.m[k]
		q := s.q != nil
		if !found || (quarantined && !q) || (q == quarantined && s.last.Before(at)) {
			oldest, at, quarantined, found = k, s.last, q, true
		}
	}
	if found {
		t.drop(oldest)
	}
}

// drop forgets source k. Called with t.mu held.
func (t *Table) drop(k Key) {
	delete(t.m, k)
	t.shares.Remove(k.Namespace, k)
}

// Status is the quarantine of source k in force at now, if any.
func (t *Table) Status(k Key, now time.Time) (Quarantine, bool) {
	if t == nil {
		return Quarantine{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.m[k]
	if !ok {
		return Quarantine{}, false
	}
	return s.status(now)
}

// Release ends the quarantine of k if it began at or before at (an operator's release names
// the time it was asked, so that it never releases a later flap); it reports whether one
// ended.
func (t *Table) Release(k Key, at, now time.Time) bool {
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.m[k]
	if !ok {
		return false
	}
	if at.After(s.released) {
		s.released = at
	}
	was := s.q != nil
	_, still := s.status(now)
	return was && !still
}

// Quarantined counts the sources in quarantine at now (reloader_quarantined_sources).
func (t *Table) Quarantined(now time.Time) int {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, s := range t.m {
		if _, ok := s.status(now); ok {
			n++
		}
	}
	return n
}

// Forget drops source k (deleted).
func (t *Table) Forget(k Key) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.drop(k)
	t.mu.Unlock()
}

// Adopt takes over a quarantine read back from a workload's authenticated record after a
// restart, unless one is known: the source stays in quarantine until it is quiet from the
// later of the record's last change and any heard since.
func (t *Table) Adopt(k Key, q Quarantine, now time.Time) {
	if t == nil || !now.Before(q.Until()) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.m[k]
	if !ok {
		s = &state{limits: t.defaults}
		t.add(k, s)
	}
	if s.q != nil || (!s.released.IsZero() && !s.released.Before(q.Since.Truncate(time.Second))) {
		return
	}
	if s.last.After(q.Last) {
		q.Last = s.last
	}
	s.q = &q
}
