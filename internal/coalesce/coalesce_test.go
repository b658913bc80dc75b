package coalesce

import (
	"testing"
	"time"
)

func TestWindow(t *testing.T) {
	now := time.Unix(1000, 0)
	w := New(300 * time.Millisecond)
	w.Now = func() time.Time { return now }
	step := func(d time.Duration) { now = now.Add(d) }

	if got := w.Wait("a"); got != 0 {
		t.Fatalf("untouched key waits %v", got)
	}
	w.Touch("a")
	if got := w.Wait("a"); got != 300*time.Millisecond {
		t.Fatalf("fresh change waits %v, want 300ms", got)
	}
	if first, ok := w.FirstChange("a"); !ok || !first.Equal(now) {
		t.Fatalf("FirstChange = %v, %v; want %v", first, ok, now)
	}
	step(200 * time.Millisecond)
	w.Touch("a") // trailing: a new change pushes the deadline
	if got := w.Wait("a"); got != 300*time.Millisecond {
		t.Fatalf("after second change waits %v, want 300ms", got)
	}
	step(300 * time.Millisecond)
	if got := w.Wait("a"); got != 0 {
		t.Fatalf("quiet key still waits %v", got)
	}

	// A steady stream of changes is cut off at MaxWait after the first.
	w.Touch("b")
	streamStart := now
	for range 20 {
		step(250 * time.Millisecond)
		w.Touch("b")
		if w.Wait("b") == 0 {
			break
		}
	}
	if got := w.Wait("b"); got != 0 {
		t.Fatalf("stream never became due, waits %v", got)
	}
	if elapsed := now.Sub(streamStart); elapsed > w.MaxWait {
		t.Fatalf("stream became due after %v, more than MaxWait %v", elapsed, w.MaxWait)
	}

	// Done keeps a change that came in after the reconcile started.
	start := now
	step(10 * time.Millisecond)
	w.Touch("c")
	w.Done("c", start)
	if w.Wait("c") == 0 {
		t.Fatal("Done dropped a change newer than the reconcile")
	}
	w.Done("c", now)
	if w.Len() != 2 { // a and b still pending until their reconciles say Done
		t.Fatalf("Len = %d, want 2", w.Len())
	}
}

func TestZeroWindowNeverWaits(t *testing.T) {
	w := New(0)
	w.Touch("a")
	if got := w.Wait("a"); got != 0 {
		t.Fatalf("disabled window waits %v", got)
	}
}
