// Package coalesce holds back a workload's reload until the changes to its sources have
// settled, so that writes landing together give one rollout instead of several.
//
// A rollout costs seconds to minutes; a second one right behind it is pure waste. Waiting a
// few hundred milliseconds after the last change costs little by comparison: a CI job that
// applies a ConfigMap and a Secret back to back, or a ConfigMap ten times, rolls once.
package coalesce

import (
	"sync"
	"time"

	"github.com/reloader-operator/reloader/internal/cachemem/shrink"
)

// Window is a trailing window per key: a key is due once Quiet has passed since its last
// change, or MaxWait since its first, whichever comes first. A zero Quiet disables it.
type Window struct {
	Quiet   time.Duration
	MaxWait time.Duration
	Now     func() time.Time

	mu      sync.Mutex
	pending map[string]span
}

type span struct{ first, last time.Time }

// New returns a window with the given quiet period; changes wait at most ten quiet periods.
func New(quiet time.Duration) *Window {
	return &Window{Quiet: quiet, MaxWait: 10 * quiet, Now: time.Now, pending: map[string]span{}}
}

// Touch records a change that concerns key. It records even with a zero Quiet, since a
// workload may have a window of its own (WaitFor).
func (w *Window) Touch(key string) {
	now := w.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.pending[key]
	if !ok {
		s.first = now
	}
	s.last = now
	w.pending[key] = s
}

// Wait returns how long key must still wait; zero means it is due.
func (w *Window) Wait(key string) time.Duration { return w.WaitFor(key, w.Quiet) }

// WaitFor is Wait for a key with a quiet period of its own (a ReloaderConfig's coalesceWindow);
// it waits at most ten quiet periods, as the window does.
func (w *Window) WaitFor(key string, quiet time.Duration) time.Duration {
	if quiet <= 0 {
		return 0
	}
	w.mu.Lock()
	s, ok := w.pending[key]
	w.mu.Unlock()
	if !ok {
		return 0
	}
	now := w.Now()
	maxWait := w.MaxWait
	if quiet != w.Quiet {
		maxWait = 10 * quiet
	}
	wait := min(s.last.Add(quiet).Sub(now), s.first.Add(maxWait).Sub(now))
	return max(wait, 0)
}

// FirstChange returns when key's oldest pending change was touched.
func (w *Window) FirstChange(key string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.pending[key]
	return s.first, ok
}

// Done forgets key's changes up to since, the time its reconcile started. A change touched
// after that stays pending, so its own reconcile still waits.
func (w *Window) Done(key string, since time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.pending[key]; ok && !s.last.After(since) {
		shrink.Delete(&w.pending, key)
	}
}

// Len is the number of keys with pending changes.
func (w *Window) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending)
}
