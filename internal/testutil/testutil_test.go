package testutil

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestPollReturnsOnceCheckPassesAndLastErrorOnTimeout(t *testing.T) {
	n := 0
	if err := poll(time.Minute, func() error {
		n++
		if n < 3 {
			return fmt.Errorf("try %d", n)
		}
		return nil
	}); err != nil || n != 3 {
		t.Errorf("poll: %v after %d tries, want nil after 3", err, n)
	}
	err := poll(100*time.Millisecond, func() error { return errors.New("never") })
	if err == nil || err.Error() != "never" {
		t.Errorf("poll on timeout: %v, want the check's last error", err)
	}
}

func TestCond(t *testing.T) {
	if err := Cond(func() (bool, error) { return true, nil })(); err != nil {
		t.Errorf("true: %v", err)
	}
	if err := Cond(func() (bool, error) { return false, nil })(); err == nil {
		t.Error("false: nil, want not yet")
	}
	boom := errors.New("boom")
	if err := Cond(func() (bool, error) { return true, boom })(); !errors.Is(err, boom) {
		t.Errorf("error: %v, want boom", err)
	}
}

func TestTimeoutScales(t *testing.T) {
	t.Setenv("RELOADER_TEST_TIMEOUT_SCALE", "2.5")
	if got := Timeout(); got != 150*time.Second {
		t.Errorf("scaled timeout %s, want 2m30s", got)
	}
	t.Setenv("RELOADER_TEST_TIMEOUT_SCALE", "nonsense")
	if got := Timeout(); got != time.Minute {
		t.Errorf("timeout with a bad scale %s, want 1m", got)
	}
}

// Settle returns only after the fingerprint has stood still for the quiet span; a change or
// an error restarts the span.
func TestSettleWaitsForAQuietSpan(t *testing.T) {
	var calls atomic.Int32
	start := time.Now()
	err := settle(400*time.Millisecond, time.Minute, func() (string, error) {
		switch n := calls.Add(1); {
		case n <= 2:
			return fmt.Sprint(n), nil // still moving
		case n == 3:
			return "", errors.New("busy")
		default:
			return "still", nil
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() < 6 {
		t.Errorf("settled after %d observations, want at least 3 quiet ones after the busy one", calls.Load())
	}
	// Quiet from the 4th call on: at least 400 ms after it, itself three intervals in.
	if took := time.Since(start); took < 400*time.Millisecond+3*settleEvery {
		t.Errorf("settled after %s, before the quiet span was over", took)
	}
}

func TestSettleFailsWhileStillChanging(t *testing.T) {
	var n atomic.Int32
	err := settle(300*time.Millisecond, time.Second, func() (string, error) { return fmt.Sprint(n.Add(1)), nil })
	if err == nil || !strings.Contains(err.Error(), "still changing") {
		t.Errorf("settle on a moving fingerprint: %v, want still changing", err)
	}
	err = settle(300*time.Millisecond, time.Second, func() (string, error) { return "", errors.New("queue not empty") })
	if err == nil || err.Error() != "queue not empty" {
		t.Errorf("settle while busy: %v, want the observer's error", err)
	}
}

const exposition = `# HELP reloader_reconcile_total Workload reconciles.
# TYPE reloader_reconcile_total counter
reloader_reconcile_total{result="error"} 0
reloader_reconcile_total{result="success"} 4
reloader_events_received_total{event_type="update",resource_type="configmaps"} 3
reloader_workqueue_depth 0
controller_runtime_active_workers{controller="deployment"} 0
reloader_reloads_waiting{reason="hold with spaces"} 0
go_goroutines 51
`

func TestMetricsIdleAndActivity(t *testing.T) {
	m := ParseMetrics(exposition)
	if got := m.Sum("reloader_reconcile_total"); got != 4 {
		t.Errorf("Sum: %g, want 4", got)
	}
	if got := m[`reloader_reloads_waiting{reason="hold with spaces"}`]; got != 0 {
		t.Errorf("a label value with spaces read as %g", got)
	}
	if err := m.Busy(); err != nil {
		t.Errorf("Busy on an idle reloader: %v", err)
	}
	if strings.Contains(m.Activity(), "go_goroutines") || !strings.Contains(m.Activity(), `reloader_reconcile_total{result="success"} 4`) {
		t.Errorf("Activity holds what it should not, or lacks a counter:\n%s", m.Activity())
	}

	working := ParseMetrics(strings.Replace(exposition, `{controller="deployment"} 0`, `{controller="deployment"} 1`, 1))
	if err := working.Busy(); err == nil || !strings.Contains(err.Error(), "active_workers") {
		t.Errorf("Busy with a worker reconciling: %v", err)
	}
	moved := ParseMetrics(strings.Replace(exposition, `} 3`, `} 4`, 1))
	if moved.Activity() == m.Activity() {
		t.Error("Activity unchanged after an event was received")
	}
	if err := Heard(m, moved, "reloader_events_received_total"); err != nil {
		t.Errorf("Heard after the counter moved: %v", err)
	}
	if err := Heard(m, m, "reloader_events_received_total"); err == nil {
		t.Error("Heard although the counter has not moved")
	}
}
