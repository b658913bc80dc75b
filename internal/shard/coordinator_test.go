package shard

import (
	"context"
	"testing"
)

// client-go starts OnStartedLeading in a goroutine of its own, so it can run after
// OnStoppedLeading, or after the shard was handed over: the filter must not take back a shard
// whose election has ended.
func TestLateStartTakesNothing(t *testing.T) {
	s, _ := NewSpace(4)
	c := &Coordinator{Filter: NewFilter(s, false), Prefix: "p", releasing: map[int]bool{}}
	ctx := context.Background()

	cb := c.callbacks(1, &elector{})
	cb.OnStartedLeading(ctx)
	if got := c.Filter.Owned(); len(got) != 1 {
		t.Fatalf("leading: owns %v, want shard 1", got)
	}
	cb.OnStoppedLeading()
	if got := c.Filter.Owned(); len(got) != 0 {
		t.Fatalf("stopped: owns %v", got)
	}

	cb = c.callbacks(2, &elector{})
	cb.OnStoppedLeading()
	cb.OnStartedLeading(ctx)
	if got := c.Filter.Owned(); len(got) != 0 {
		t.Fatalf("start heard after stop: owns %v", got)
	}

	// Handed over (release) while the election was still acquiring, then won.
	done := make(chan struct{})
	close(done)
	e := &elector{cancel: func() {}, done: done}
	cb = c.callbacks(3, e)
	ended, end := context.WithCancel(ctx)
	end() // no grace to wait for
	c.mu.Lock()
	c.release(ended, 3, e)
	c.mu.Unlock()
	cb.OnStartedLeading(ctx)
	c.wg.Wait()
	if got := c.Filter.Owned(); len(got) != 0 {
		t.Fatalf("won after hand-over: owns %v", got)
	}
}
