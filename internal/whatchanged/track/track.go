// Package track keeps the per-source change table: for the sources that changed while
// reloader ran, what they were before their latest changes and who wrote them, so that a
// reload's report names the keys it changed and their writer (internal/whatchanged).
package track

import (
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/reloader-operator/reloader/internal/fair"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/whatchanged"
)

// Changes keeps, for the sources that changed while reloader ran, the per-key digests they
// had before their latest changes, so that a reload names the keys it changed (the record on
// a workload holds one hash per source, not per key): from the state the workload last
// applied when it is among those kept, so that a reload that coalesced several writes names
// the keys of all of them, else from the state before the latest write. It is fed by a predicate on each
// source watch (Observe), which runs before the event is queued for its reconciler, and read
// when a reload is reported. It holds the packed string the cache held before the change (no copy, and no
// values: digests) before each of its latest writes, newest first, up to maxBeforeBytes in
// all; or, for a source of more than that, the key names of its latest change already bounded (at most 3*MaxNamed names); and at most max sources: past that, the
// oldest change is dropped, and a reload that still carries it names no keys.
// Of the sources of one namespace it holds at most max/4, and when full it drops the oldest
// change of the namespace with the most (fair.Shares): one namespace's churn never drops
// another's changes.
type Changes struct {
	// OverCap announces the sources whose keys are too many to digest one by one, as the
	// watches see them; its zero value announces nothing.
	OverCap sourcecache.OverCapNotices

	mu      sync.Mutex
	entries map[changeKey]keyChange
	shares  *fair.Shares[changeKey]
	seq     uint64
}

type changeKey struct {
	namespace string
	id        source.ID
}

// keyChange is one source's latest changes, up to the content of hash to.
type keyChange struct {
	// seq orders the entries by the time of their change: the oldest goes first.
	seq uint64
	to  string
	// befores are the packed contents before the latest writes, newest first (each starts
	// with its content hash); when the source is too large for one, keys holds the key names
	// of the latest change.
	befores []string
	keys    whatchanged.Keys
	// writer wrote the latest change: the manager whose managedFields entry it changed.
	writer whatchanged.Writer
	known  bool
}

const (
	defaultMaxChanges = 4096
	// changesShare: one namespace holds at most 1/changesShare of the table.
	changesShare   = 4
	maxBeforeBytes = 4 << 10
	// maxStates bounds the states kept before a source's latest writes.
	maxStates = 4
)

// New returns a table of the latest changes of up to max sources (a default when 0).
func New(max int) *Changes {
	if max <= 0 {
		max = defaultMaxChanges
	}
	return &Changes{entries: map[changeKey]keyChange{}, shares: fair.NewShares[changeKey](max, max/changesShare)}
}

// Observe is a predicate that lets every event through and notes the content changes of
// st's sources. Each workload controller's watch runs it; the first notes, the others find
// the change noted.
func (c *Changes) Observe(st sourcecache.SourceType) predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool {
			if c != nil && st.KeyDigests != nil {
				c.OverCap.Observe(st, e.Object)
			}
			return true
		},
		UpdateFunc: func(e event.UpdateEvent) bool {
			if c != nil && st.KeyDigests != nil {
				c.note(st, e.ObjectOld, e.ObjectNew)
				c.OverCap.Observe(st, e.ObjectNew)
			}
			return true
		},
		DeleteFunc: func(e event.DeleteEvent) bool {
			if c != nil && st.KeyDigests != nil {
				k := changeKey{e.Object.GetNamespace(), source.ID{Kind: st.Kind, Name: e.Object.GetName()}}
				c.mu.Lock()
				delete(c.entries, k)
				c.shares.Remove(k.namespace, k)
				c.mu.Unlock()
				c.OverCap.Forget(k.namespace, k.id)
			}
			return true
		},
	}
}

func (c *Changes) note(st sourcecache.SourceType, old, cur client.Object) {
	from, to := sourcecache.CachedHash(old), sourcecache.CachedHash(cur)
	before, ok := sourcecache.Packed(old)
	if from == to || !ok {
		return
	}
	k := changeKey{cur.GetNamespace(), source.ID{Kind: st.Kind, Name: cur.GetName()}}
	c.mu.Lock()
	defer c.mu.Unlock()
	prev, known := c.entries[k]
	if known && prev.to == to && len(prev.befores) > 0 && sourcecache.PackedHash(prev.befores[0]) == from {
		return // noted by another controller's watch
	}
	c.seq++
	e := keyChange{seq: c.seq, to: to}
	e.writer, e.known = sourcecache.ChangeWriter(old, cur)
	if len(before) <= maxBeforeBytes {
		e.befores = []string{before}
		size := len(before)
		if known && prev.to == from {
			// A write on top of the one noted: keep the states before, while they fit.
			for _, b := range prev.befores {
				if size += len(b); size > maxBeforeBytes || len(e.befores) == maxStates {
					break
				}
				e.befores = append(e.befores, b)
			}
		}
	} else {
		e.keys = whatchanged.Diff(st.KeyDigestsOf(old), st.KeyDigestsOf(cur), nil)
	}
	if !known {
		if victim, crowded := c.shares.Crowded(k.namespace); crowded {
			c.dropOldest(c.shares.Keys(victim))
		}
		c.shares.Add(k.namespace, k)
	}
	c.entries[k] = e
}

// dropOldest makes room: of the sources of, the change longest ago was reported long since. A
// scan of one namespace's sources, only when full.
func (c *Changes) dropOldest(of map[changeKey]struct{}) {
	var oldest changeKey
	var seq uint64
	first := true
	for k := range of {
		if e := c.entries[k]; first || e.seq < seq {
			oldest, seq, first = k, e.seq, false
		}
	}
	if !first {
		delete(c.entries, oldest)
		c.shares.Remove(oldest.namespace, oldest)
	}
}

// Keys names the keys a source whose content is now o changed since the state whose hash is
// applied (the workload's record: the whole content's hash, or with only, the hash of those
// keys), or, when that state is not kept, since the state before its latest write; restricted
// to only when not nil. ok is false when no change is known (not seen, or not the one that
// made the content of o).
func (c *Changes) Keys(st sourcecache.SourceType, ns string, id source.ID, o client.Object, only []string, applied string) (whatchanged.Keys, bool) {
	if c == nil {
		return whatchanged.Keys{}, false
	}
	c.mu.Lock()
	e, ok := c.entries[changeKey{ns, id}]
	c.mu.Unlock()
	if !ok || e.to != st.ContentHash(o) {
		return whatchanged.Keys{}, false
	}
	if len(e.befores) == 0 {
		return e.keys, true
	}
	from := e.befores[0]
	for _, b := range e.befores {
		h := sourcecache.PackedHash(b)
		if only != nil {
			h = sourcecache.SubsetHash(h, sourcecache.PackedDigests(b), only)
		}
		if h == applied {
			from = b
			break
		}
	}
	return whatchanged.Diff(sourcecache.PackedDigests(from), st.KeyDigestsOf(o), only), true
}

// Writer is the writer of the latest change of a source whose content is now o, when the
// table noted that change; else the newest writer o names.
func (c *Changes) Writer(st sourcecache.SourceType, ns string, id source.ID, o client.Object) (whatchanged.Writer, bool) {
	if c != nil {
		c.mu.Lock()
		e, ok := c.entries[changeKey{ns, id}]
		c.mu.Unlock()
		if ok && e.known && e.to == st.ContentHash(o) {
			return e.writer, true
		}
	}
	return st.Writer(o)
}

// Report tells the keys and writer of a change of source s, of type st, since the content of
// hash seen, created when new (the webhook notifier's document).
func (c *Changes) Report(st sourcecache.SourceType, s sourcecache.Snapshot, created bool, seen string) whatchanged.Report {
	o := s.Object()
	if o == nil || st.Pool != nil {
		return whatchanged.Report{}
	}
	var keys whatchanged.Keys
	switch {
	case st.KeyDigests == nil:
	case created:
		keys = whatchanged.Diff(nil, st.KeyDigestsOf(o), nil)
	default:
		keys, _ = c.Keys(st, o.GetNamespace(), source.ID{Kind: st.Kind, Name: o.GetName()}, o, nil, seen)
	}
	w, known := c.Writer(st, o.GetNamespace(), source.ID{Kind: st.Kind, Name: o.GetName()}, o)
	return whatchanged.NewReport(keys, w, known)
}
