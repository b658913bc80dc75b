package controller

import (
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/source"
)

// A workload created moments before a change of its source can reach the cache after the
// handlers heard the change (each kind has its own watch), so they could not note it on the
// workload, and its first reconcile would take the new content as what it started with. For
// a short while after each change, the source's content before it is kept here, and a
// workload without record created no later than the change compares with that instead, as a
// workload seen before the change would.
const (
	recentWindow = 30 * time.Second
	// Bounds: changes kept per source, and sources with changes kept.
	recentPerSource = 4
	recentSources   = 4096
)

type recentChange struct {
	at  time.Time
	old client.Object
}

// changedRecently keeps what a source was before the change handled at now.
func (b *Baselines) changedRecently(ns string, id source.ID, old client.Object, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.recent == nil {
		b.recent = map[handledKey][]recentChange{}
	}
	k := handledKey{ns, id}
	if _, ok := b.recent[k]; !ok && len(b.recent) >= recentSources {
		b.expireRecent(now)
		if len(b.recent) >= recentSources {
			return // a burst across thousands of sources: only their watch-time baselines
		}
	}
	changes := append(b.recent[k], recentChange{at: now, old: old})
	if len(changes) > recentPerSource {
		changes = changes[len(changes)-recentPerSource:]
	}
	b.recent[k] = changes
}

// changedAfter returns what the source was before its first change handled at or after
// created (a creation time in whole seconds: a change within the same second counts as after
// it), if that change is recent. Called with b.mu held.
func (b *Baselines) changedAfter(ns string, id source.ID, created, now time.Time) (client.Object, bool) {
	for _, c := range b.recent[handledKey{ns, id}] {
		if now.Sub(c.at) <= recentWindow && !c.at.Before(created) {
			return c.old, true
		}
	}
	return nil, false
}

// expireRecent drops the changes older than the window. Called with b.mu held.
func (b *Baselines) expireRecent(now time.Time) {
	for k, changes := range b.recent {
		for len(changes) > 0 && now.Sub(changes[0].at) > recentWindow {
			changes = changes[1:]
		}
		if len(changes) == 0 {
			delete(b.recent, k)
		} else {
			b.recent[k] = changes
		}
	}
}
