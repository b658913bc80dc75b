package main

import (
	"errors"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// countingSink counts the WithValues calls that reach its base.
type countingSink struct {
	logr.LogSink
	withValues *int
}

func (c countingSink) WithValues(kv ...any) logr.LogSink {
	*c.withValues++
	return countingSink{c.LogSink.WithValues(kv...), c.withValues}
}

func (c countingSink) WithName(name string) logr.LogSink {
	return countingSink{c.LogSink.WithName(name), c.withValues}
}

func (c countingSink) WithCallDepth(depth int) logr.LogSink {
	return countingSink{c.LogSink.(logr.CallDepthLogSink).WithCallDepth(depth), c.withValues}
}

// Every line says what the base's own logger says, the caller included; the pairs reach the
// base only with a line.
func TestLazyLoggerWritesWhatTheBaseWrites(t *testing.T) {
	newBase := func(lines *[]string, withValues *int) logr.Logger {
		f := funcr.New(func(prefix, args string) { *lines = append(*lines, prefix+" "+args) },
			funcr.Options{LogCaller: funcr.All, Verbosity: 1})
		return logr.New(countingSink{f.GetSink(), withValues})
	}
	var plain, lazy []string
	var plainWith, lazyWith int
	write := func(l logr.Logger, beforeLines func()) {
		r := l.WithName("controller").WithValues("controller", "deployment", "reconcileID", "abc")
		r = r.WithValues("namespace", "ns", "name", "web")
		beforeLines()
		r.Info("reloaded", "changes", 1)
		r.V(1).Info("detail")
		r.V(2).Info("not written")
		r.Error(errors.New("boom"), "failed", "retry", true)
	}
	checks := []func(){func() {}, func() {
		if lazyWith != 0 {
			t.Errorf("pairs handed to the base before any line: %d WithValues calls", lazyWith)
		}
	}}
	for i, l := range []logr.Logger{newBase(&plain, &plainWith), lazyLogger(newBase(&lazy, &lazyWith))} {
		write(l, checks[i]) // one call site: the callers reported are the same lines
	}

	if len(plain) != 3 || len(lazy) != len(plain) {
		t.Fatalf("lines: plain %d, lazy %d, want 3 each:\n%q\n%q", len(plain), len(lazy), plain, lazy)
	}
	for i := range plain {
		if plain[i] != lazy[i] {
			t.Errorf("line %d:\nlazy  %s\nplain %s", i, lazy[i], plain[i])
		}
	}
	// Once for the logger that wrote: its first line made the base's copy, the next ones
	// (V(1), Error) reuse it.
	if lazyWith != 1 {
		t.Errorf("lazy: %d WithValues calls reached the base, want 1", lazyWith)
	}
}

// A logger given pairs that writes nothing never hands them on.
func TestLazyLoggerSilentReconcile(t *testing.T) {
	var calls int
	f := funcr.New(func(string, string) { t.Error("a line was written") }, funcr.Options{})
	l := lazyLogger(logr.New(countingSink{f.GetSink(), &calls}))
	for range 100 {
		l.WithValues("reconcileID", "x", "name", "web").V(1).Info("not enabled")
	}
	if calls != 0 {
		t.Errorf("%d WithValues calls reached the base for loggers that wrote nothing", calls)
	}
	if again := lazyLogger(l); again.GetSink() != l.GetSink() {
		t.Error("a lazy logger is wrapped again")
	}
}
