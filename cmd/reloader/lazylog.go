package main

import (
	"sync/atomic"

	"github.com/go-logr/logr"
)

// lazyValues is a log sink that keeps the key/value pairs given to WithValues and hands them
// to its base only when a line is written. controller-runtime gives each reconcile a logger
// with seven pairs (the controller, the object, the reconcile ID); zap encodes them at once,
// a copy of its encoder and the object reference encoded by reflection, and most reconciles
// write no line. What a line says is the same: the base gets the same pairs, in the same
// order, before the line's own.
type lazyValues struct {
	base  logr.LogSink
	kv    []any
	depth int
	// with is base with kv, made at the first line written and kept for the next ones.
	with *atomic.Pointer[logr.LogSink]
}

// lazyLogger is logger, its pairs handed on only when a line is written.
func lazyLogger(logger logr.Logger) logr.Logger {
	base := logger.GetSink()
	if base == nil {
		return logger
	}
	if _, ok := base.(*lazyValues); ok {
		return logger
	}
	// The base was initialised by its own logr.Logger; this sink's frame is one more.
	if cd, ok := base.(logr.CallDepthLogSink); ok {
		base = cd.WithCallDepth(1)
	}
	return logr.New(&lazyValues{base: base, with: new(atomic.Pointer[logr.LogSink])})
}

// Init implements logr.LogSink; the base is initialised already.
func (l *lazyValues) Init(logr.RuntimeInfo) {}

// Enabled implements logr.LogSink.
func (l *lazyValues) Enabled(level int) bool { return l.base.Enabled(level) }

// Info implements logr.LogSink.
func (l *lazyValues) Info(level int, msg string, kv ...any) { l.sink().Info(level, msg, kv...) }

// Error implements logr.LogSink.
func (l *lazyValues) Error(err error, msg string, kv ...any) { l.sink().Error(err, msg, kv...) }

// WithValues implements logr.LogSink: the pairs are kept, not handed on.
func (l *lazyValues) WithValues(kv ...any) logr.LogSink {
	all := make([]any, 0, len(l.kv)+len(kv))
	return &lazyValues{base: l.base, kv: append(append(all, l.kv...), kv...), depth: l.depth, with: new(atomic.Pointer[logr.LogSink])}
}

// WithName implements logr.LogSink.
func (l *lazyValues) WithName(name string) logr.LogSink {
	return &lazyValues{base: l.base.WithName(name), kv: l.kv, depth: l.depth, with: new(atomic.Pointer[logr.LogSink])}
}

// WithCallDepth implements logr.CallDepthLogSink.
func (l *lazyValues) WithCallDepth(depth int) logr.LogSink {
	return &lazyValues{base: l.base, kv: l.kv, depth: l.depth + depth, with: new(atomic.Pointer[logr.LogSink])}
}

// sink is the base with the pairs kept and the call depth, made once.
func (l *lazyValues) sink() logr.LogSink {
	if s := l.with.Load(); s != nil {
		return *s
	}
	s := l.base
	if l.depth > 0 {
		if cd, ok := s.(logr.CallDepthLogSink); ok {
			s = cd.WithCallDepth(l.depth)
		}
	}
	if len(l.kv) > 0 {
		s = s.WithValues(l.kv...)
	}
	l.with.Store(&s)
	return s
}
