// Package testutil holds the waits the tests against a real API server share.
package testutil

import (
	"runtime"
	"testing"
	"time"
)

// Must fails the test at once on an error.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Eventually retries check until it returns nil, or fails the test with its last error after
// 20 s: the state of a cluster converges, it is not there at once.
func Eventually(t testing.TB, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// RetainedBy returns the heap bytes still held by what fn returns: a measure for tests that
// bound what a cache keeps per object.
func RetainedBy(fn func() any) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := fn()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	return after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc)
}
