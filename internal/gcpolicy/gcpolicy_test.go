package gcpolicy

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name    string
		scanned uint64
		want    int
	}{
		{"nothing scanned yet: the cap", 0, maxGCPercent},
		{"1 MiB: 400", 1 * mib, maxGCPercent},
		{"0.9 MiB: the cap", 900 << 10, maxGCPercent},
		{"6 MiB: 4 MiB of headroom, rounded up", 6 * mib, 67},
		{"8 MiB: half", 8 * mib, 50},
		{"16 MiB: a quarter is 4 MiB", 16 * mib, 25},
		{"17 MiB: a quarter is more", 17 * mib, 25},
		{"1 GiB: the base", 1 << 30, 25},
	} {
		got := gcPercentFor(c.scanned, 25, 4*mib)
		if got != c.want {
			t.Errorf("%s: gcPercentFor(%d) = %d, want %d", c.name, c.scanned, got, c.want)
		}
		if c.scanned > 0 && got < maxGCPercent && c.scanned*uint64(got)/100 < 4*mib {
			t.Errorf("%s: %d%% of %d leaves less than 4 MiB", c.name, got, c.scanned)
		}
	}
}

func TestChangedEnough(t *testing.T) {
	for _, c := range []struct {
		cur, want int
		set       bool
	}{
		{67, 67, false},
		{67, 62, false}, // a heap breathing a little
		{67, 72, false},
		{67, 59, true},
		{67, 80, true},
		{30, 25, true}, // back to the base, however small the move
		{25, 26, false},
		{25, 28, true},
	} {
		if got := changedEnough(c.cur, c.want, 25); got != c.set {
			t.Errorf("changedEnough(%d, %d) = %v, want %v", c.cur, c.want, got, c.set)
		}
	}
}

func TestApplyGCPolicy(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	// GOGC set: the runtime's reading of it (here 100, as set above) is kept, not replaced.
	if p := Apply(env(map[string]string{"GOGC": "100"})); p.Percent != 100 || !p.FromEnv || p.MinHeadroom != 0 {
		t.Errorf("GOGC=100: %+v, want 100 from env without headroom", p)
	}
	runtime.GC()
	if got := currentGCPercent(); got != 100 {
		t.Errorf("runtime GC percent %d with GOGC set, want 100", got)
	}

	// A large GOGC is a number, off is -1.
	debug.SetGCPercent(5000000)
	if p := Apply(env(map[string]string{"GOGC": "5000000"})); p.Percent != 5000000 {
		t.Errorf("GOGC=5000000 reads as %d", p.Percent)
	}
	debug.SetGCPercent(-1)
	if p := Apply(env(map[string]string{"GOGC": "off"})); p.Percent != -1 {
		t.Errorf("GOGC=off reads as %d, want -1", p.Percent)
	}
	debug.SetGCPercent(100)
}

// The policy sets the percent at once and again after a collection that finds a different
// live heap; checked on a headroom of its own, with no other collection hook installed.
func TestHeadroomFollowsTheLiveHeap(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	// The test binary's live heap is a few MiB: a 64 MiB headroom asks for the cap.
	h := newHeadroom(25, 64<<20)
	h.adjust()
	if got := currentGCPercent(); got != maxGCPercent || h.current != maxGCPercent {
		t.Fatalf("percent after adjust: runtime %d, policy %d, want %d", got, h.current, maxGCPercent)
	}

	// With no least headroom, the base: set after the next collection, by the hook.
	h = newHeadroom(25, 0)
	h.current = maxGCPercent // as in force
	h.afterEachGC()
	t.Cleanup(func() { h.stopped.Store(true) })
	deadline := time.Now().Add(10 * time.Second)
	for currentGCPercent() != 25 {
		if time.Now().After(deadline) {
			t.Fatalf("percent %d after collections, want the base 25", currentGCPercent())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // the finalizer runs on its own goroutine
	}
}

// Until Settle the least headroom is start-up's 32 MiB; after it, 4 MiB. On a live heap of
// 64 MiB: half of it, then the base quarter.
func TestSettleEndsTheStartupHeadroom(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	live := make([]byte, 64<<20)
	for i := range live {
		live[i] = byte(i)
	}
	runtime.GC()
	p := Apply(func(string) string { return "" })
	h := inForce.Load()
	t.Cleanup(func() { h.stopped.Store(true); inForce.Store(nil) })
	if p.FromEnv || p.MinHeadroom != 4<<20 || p.StartupHeadroom != 32<<20 {
		t.Fatalf("policy %+v, want 4 MiB settled and 32 MiB at start-up", p)
	}
	// What else is live (stacks, globals, the test binary's heap) moves the percent a little.
	if got := currentGCPercent(); got < 45 || got > 50 {
		t.Errorf("percent at start-up with 64 MiB live: %d, want about 50 (32 MiB)", got)
	}
	Settle()
	if got := currentGCPercent(); got != 25 {
		t.Errorf("percent after Settle with 64 MiB live: %d, want the base 25", got)
	}
	runtime.KeepAlive(live)
}
