package writer

import (
	"context"
	"testing"
	"time"
)

// A write begun outlives the stop signal's cancellation, never the reconcile's deadline.
func TestCarriedKeepsTheDeadlineNotTheCancellation(t *testing.T) {
	deadline := time.Now().Add(time.Hour)
	parent, cancelParent := context.WithDeadline(context.Background(), deadline)
	ctx, cancel := Carried(parent)
	defer cancel()
	cancelParent()
	if ctx.Err() != nil {
		t.Fatalf("the write's context ended with its reconcile's cancellation: %v", ctx.Err())
	}
	if got, ok := ctx.Deadline(); !ok || !got.Equal(deadline) {
		t.Errorf("deadline %v (%v), want the reconcile's %v", got, ok, deadline)
	}
	past, cancelPast := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelPast()
	late, cancelLate := Carried(past)
	defer cancelLate()
	if late.Err() == nil {
		t.Error("a write past the reconcile's deadline was not ended")
	}
	free, cancelFree := Carried(context.Background())
	defer cancelFree()
	if _, ok := free.Deadline(); ok || free.Err() != nil {
		t.Error("a reconcile without deadline gave its write one, or ended it")
	}
}
