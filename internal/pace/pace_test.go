package pace

import (
	"fmt"
	"testing"
	"time"
)

// Sixty workloads due at once at 20/s with a burst of 5: five go now, the others get slots
// 50 ms apart; asking again before the slot keeps the place, and the map empties as they go.
func TestReloadSlotsAreSpreadAndKept(t *testing.T) {
	p := New(20, 5, 0)
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	var waits []time.Duration
	for i := range 60 {
		waits = append(waits, p.Reload(fmt.Sprint("w", i), t0))
	}
	for i, w := range waits {
		want := time.Duration(max(i-4, 0)) * 50 * time.Millisecond
		if d := w - want; d < -time.Millisecond || d > time.Millisecond {
			t.Fatalf("workload %d waits %v, want %v", i, w, want)
		}
	}
	if p.Len() != 55 {
		t.Fatalf("%d slots kept, want 55", p.Len())
	}
	if w := p.Reload("w30", t0.Add(time.Second)); w.Round(time.Millisecond) != 300*time.Millisecond {
		t.Errorf("asked again early: waits %v, want the same slot (300ms more)", w)
	}
	if w := p.Reload("w30", t0.Add(1300*time.Millisecond)); w != 0 {
		t.Errorf("at its slot: waits %v", w)
	}
	p.Forget("w59", t0.Add(1300*time.Millisecond))
	if p.Len() != 53 {
		t.Errorf("%d slots kept after one used and one forgotten, want 53", p.Len())
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
		if w := p.Reload(fmt.Sprint("old", i), t0); w != 0 {
			t.Errorf("reload %d waits %v behind first records", i, w)
		}
	}
	if p.Len() != 0 {
		t.Errorf("first sights kept %d slots", p.Len())
	}
}

// With reloads unpaced, first records go through their own limiter, by slot.
func TestFirstSightsAlonePacedAtTheirRate(t *testing.T) {
	p := New(0, 10, 50)
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	var last time.Duration
	for i := range 5000 {
		last = p.FirstSight(fmt.Sprint("w", i), t0)
	}
	// 50 at once, then 50/s: the 5,000th at (5000-50)/50 s.
	if want := 99 * time.Second; last.Round(time.Millisecond) != want {
		t.Errorf("5,000th first record waits %v, want %v", last, want)
	}
	if w := p.Reload("w1", t0); w != 0 {
		t.Errorf("an unpaced reload waits %v", w)
	}
	var nilPacer *Pacer
	if nilPacer.Reload("x", t0) != 0 || nilPacer.FirstSight("x", t0) != 0 || nilPacer.Len() != 0 {
		t.Error("a nil Pacer paces")
	}
}
