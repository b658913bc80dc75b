// Package testutil is the test-support family the tests of every module share: Must, the one
// polling helper (Eventually), the quiescence wait that negative checks use instead of fixed
// sleeps (Settle, with Metrics for reloader's own counters), and RetainedBy. It links no
// envtest: the cluster TestMain is internal/testenv/clustertest, and object builders are
// in testutil/objects.
package testutil

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
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

// Timeout is how long Eventually and Settle wait before they fail the test: 60 s, times
// RELOADER_TEST_TIMEOUT_SCALE when it is set (a number such as 2 or 0.5), for CI machines
// slower than a busy 2-core one. A passing test never waits for it.
func Timeout() time.Duration {
	return scaled(60 * time.Second)
}

func scaled(d time.Duration) time.Duration {
	if s, err := strconv.ParseFloat(os.Getenv("RELOADER_TEST_TIMEOUT_SCALE"), 64); err == nil && s > 0 {
		return time.Duration(float64(d) * s)
	}
	return d
}

// pollEvery is how often Eventually asks again.
const pollEvery = 50 * time.Millisecond

// Eventually retries check until it returns nil, or fails the test with its last error after
// Timeout: the state of a cluster converges, it is not there at once.
func Eventually(t testing.TB, what string, check func() error) {
	t.Helper()
	EventuallyWithin(t, Timeout(), what, check)
}

// EventuallyWithin is Eventually with a timeout of its own (scaled as Timeout is), for the
// few waits that are longer by design (a rollout through several controllers, a Lease that
// must expire).
func EventuallyWithin(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	if err := poll(scaled(timeout), check); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// Cond turns a yes/no condition with an error (the shape of wait.ConditionFunc) into a check
// for Eventually: false is "not yet", an error is reported as the last one seen.
func Cond(cond func() (bool, error)) func() error {
	return func() error {
		ok, err := cond()
		if err != nil {
			return err
		}
		if !ok {
			return errNotYet
		}
		return nil
	}
}

var errNotYet = fmt.Errorf("condition not met")

func poll(timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(pollEvery)
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
