package pace

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// Sixty workloads due at once at 20/s with a burst of 5: five go now, the others 50 ms apart
// in the order they came; asking again early keeps the place, and the maps empty as they go.
func TestReloadsAreSpreadAndKeepTheirPlace(t *testing.T) {
	p := New(20, 5, 0)
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	next := map[string]time.Time{}
	var order []string
	for i := range 60 {
		k := fmt.Sprintf("w%02d", i)
		if w := p.Reload(k, "ns", t0); w > 0 {
			next[k] = t0.Add(w)
		} else {
			order = append(order, k)
		}
	}
	if len(order) != 5 || p.Len() != 55 {
		t.Fatalf("%d went at once and %d wait, want 5 and 55", len(order), p.Len())
	}
	first := next["w30"]
	if w := p.Reload("w30", "ns", t0.Add(time.Millisecond)); t0.Add(time.Millisecond).Add(w).After(first.Add(time.Millisecond)) {
		t.Errorf("asked again early: goes at %v, later than the %v it was told", w, first.Sub(t0))
	}
	at := map[string]time.Time{}
	for now := t0; len(next) > 0 && now.Before(t0.Add(time.Minute)); now = now.Add(time.Millisecond) {
		for _, k := range sortedDue(next, now) {
			if w := p.Reload(k, "ns", now); w > 0 {
				next[k] = now.Add(w)
				continue
			}
			order, at[k] = append(order, k), now
			delete(next, k)
		}
	}
	if !slices.IsSorted(order) || len(order) != 60 {
		t.Errorf("reloads in the order %v, want the order they came", order)
	}
	for i := 5; i < 60; i++ {
		k := fmt.Sprintf("w%02d", i)
		if want := time.Duration(i-4) * 50 * time.Millisecond; at[k].Sub(t0)-want > 2*time.Millisecond || at[k].Sub(t0) < want-early {
			t.Errorf("%s went after %v, want %v", k, at[k].Sub(t0), want)
		}
	}
	p.Reload("x", "ns", t0.Add(time.Minute))
	p.Reload("y", "ns", t0.Add(time.Minute))
	p.Forget("y", t0.Add(time.Minute))
	if p.Len() != 0 {
		t.Errorf("%d entries kept after all went and one was forgotten", p.Len())
	}
}

// First records take a token only while more than half the burst is free: a reload due after
// a crowd of first sights still goes at once.
func TestFirstSightsLeaveReloadsTheirTokens(t *testing.T) {
	p := New(10, 10, 50)
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	granted := 0
	for i := range 100 {
		if w := p.FirstSight(fmt.Sprint("new", i), t0); w == 0 {
			granted++
		} else if w < 500*time.Millisecond || w >= time.Second {
			t.Fatalf("first sight retries after %v, want half a burst's refill (500ms) plus jitter", w)
		}
	}
	if granted != 5 {
		t.Errorf("%d first records granted from a full burst of 10, want 5", granted)
	}
	for i := range 5 {
		if w := p.Reload(fmt.Sprint("old", i), "ns", t0); w != 0 {
			t.Errorf("reload %d waits %v behind first records", i, w)
		}
	}
	if p.Len() != 0 {
		t.Errorf("first sights kept %d slots", p.Len())
	}
}

// With reloads unpaced, first records go through their own limiter, by slot.
func TestFirstSightsAlonePacedAtTheirRate(t *testing.T) {
	p := New(0, 10, 20) // the default --first-sight-rate
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	var last time.Duration
	for i := range 5000 {
		last = p.FirstSight(fmt.Sprint("w", i), t0)
	}
	// One at once, then 20/s: the 5,000th at (5000-1)/20 s.
	if want := 249950 * time.Millisecond; last.Round(time.Millisecond) != want {
		t.Errorf("5,000th first record waits %v, want %v", last, want)
	}
	if w := p.Reload("w1", "ns", t0); w != 0 {
		t.Errorf("an unpaced reload waits %v", w)
	}
	var nilPacer *Pacer
	if nilPacer.Reload("x", "ns", t0) != 0 || nilPacer.FirstSight("x", t0) != 0 || nilPacer.Len() != 0 {
		t.Error("a nil Pacer paces")
	}
}

// A namespace rolling 100 workloads at 10/s, and another's one reload due just after: that
// one goes after the tokens already handed out (the horizon: one token here) and one turn:
// within half a second, where first come it would wait for all 100, ten seconds. Each
// workload asks again when the wait it was given ends, as the reconciler's requeue does.
func TestTokensTakeTurnsBetweenNamespaces(t *testing.T) {
	p := New(10, 1, 0)
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	next := map[string]time.Time{} // workload -> when it asks again
	for i := range 100 {
		next[fmt.Sprintf("a/w%d", i)] = t0
	}
	next["b/w"] = t0.Add(time.Millisecond)
	reloaded := map[string]time.Time{}
	for now := t0; len(next) > 0 && now.Before(t0.Add(time.Minute)); now = now.Add(5 * time.Millisecond) {
		for _, k := range sortedDue(next, now) {
			if w := p.Reload(k, k[:1], now); w > 0 {
				next[k] = now.Add(w)
			} else {
				reloaded[k] = now
				delete(next, k)
			}
		}
	}
	if at, ok := reloaded["b/w"]; !ok || at.Sub(t0) > 500*time.Millisecond {
		t.Errorf("namespace b's reload went after %v, want within 500ms", at.Sub(t0))
	}
	aBefore := 0
	for k, at := range reloaded {
		if k[0] == 'a' && at.Before(reloaded["b/w"]) {
			aBefore++
		}
	}
	if aBefore > 4 {
		t.Errorf("%d of namespace a's reloads went before b's, want at most 4", aBefore)
	}
	// The rate holds overall: 1 at once, then 10/s.
	last := t0
	for _, at := range reloaded {
		last = maxTime(last, at)
	}
	if d := last.Sub(t0); len(reloaded) != 101 || d < 9900*time.Millisecond || d > 11*time.Second {
		t.Errorf("%d reloads, the last after %v; want 101 over about 10s", len(reloaded), d)
	}
	if p.Len() != 0 {
		t.Errorf("%d entries left", p.Len())
	}
}

// A token handed to a reload that is no longer due goes back to the bucket.
func TestForgottenTokenGoesBack(t *testing.T) {
	p := New(10, 1, 0)
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	p.Reload("a/1", "a", t0)
	if w := p.Reload("a/2", "a", t0); w != 100*time.Millisecond {
		t.Fatalf("a/2 waits %v, want the next token's 100ms", w)
	}
	p.Forget("a/2", t0)
	if w := p.Reload("b/1", "b", t0.Add(100*time.Millisecond)); w != 0 {
		t.Errorf("after the token handed to a/2 was forgotten, b/1 waits %v", w)
	}
	if p.Len() != 0 {
		t.Errorf("%d entries left", p.Len())
	}
}

func sortedDue(next map[string]time.Time, now time.Time) []string {
	var due []string
	for k, at := range next {
		if !at.After(now) {
			due = append(due, k)
		}
	}
	slices.Sort(due)
	return due
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// With --shards the rates are the install's: a replica owning 3 of 12 shards reloads at a
// quarter of --reload-rate with a quarter of the burst (rounded up), one owning none at one
// shard's share, one owning all at the whole; first records likewise.
func TestShareByShardsOwned(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	// went counts the reloads of 200 workloads due at t0 that go within the first 10 s.
	went := func(p *Pacer) int {
		n := 0
		next := map[string]time.Time{}
		for i := range 200 {
			next[fmt.Sprintf("w%03d", i)] = t0
		}
		for now := t0; now.Before(t0.Add(10 * time.Second)); now = now.Add(5 * time.Millisecond) {
			for _, k := range sortedDue(next, now) {
				if w := p.Reload(k, "ns", now); w > 0 {
					next[k] = now.Add(w)
					continue
				}
				n++
				delete(next, k)
			}
		}
		return n
	}
	for _, tt := range []struct {
		owned, total int
		want         int // burst + 10 s at the share of 20/s
	}{
		{3, 12, 3 + 50},    // 5/s, burst ⌈10·3/12⌉ = 3
		{0, 12, 1 + 16},    // 20/12 ≈ 1.67/s, burst 1
		{12, 12, 10 + 200}, // all: 20/s, burst 10 (200 workloads: all go)
	} {
		p := New(20, 10, 0)
		p.Share(tt.owned, tt.total)
		want := min(tt.want, 200)
		if got := went(p); got < want-1 || got > want+1 {
			t.Errorf("%d of %d shards: %d reloads in 10s, want %d (%s)", tt.owned, tt.total, got, want, p)
		}
	}
	// Shares change as shards move; first records when reloads are unpaced too.
	p := New(0, 1, 40)
	p.Share(1, 4)
	if got := float64(p.first.Limit()); got != 10 || p.first.Burst() != 1 {
		t.Errorf("first records at 1 of 4 shards: %v/s, burst %d, want 10/s, 1", got, p.first.Burst())
	}
	p.Share(2, 4)
	if got := float64(p.first.Limit()); got != 20 {
		t.Errorf("first records at 2 of 4 shards: %v/s, want 20/s", got)
	}
	var nilPacer *Pacer
	nilPacer.Share(1, 2) // no pacing: nothing to share
}
