// Package e2e runs the built reloader binary, as a user does, against a local cluster with
// real rollouts (controller-manager, scheduler and kwok nodes).
package e2e

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/reloader-operator/reloader/internal/testenv/proc"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// binDir holds the reloader binary the tests share; TestMain removes it.
var binDir string

// reloaderBinary builds cmd/reloader once for the package: every test runs the same binary,
// and a link per test cost seconds each on a busy machine.
var reloaderBinary = sync.OnceValues(func() (string, error) {
	return proc.Build("../../cmd/reloader", binDir)
})

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "reloader-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// buildReloader returns the package's reloader binary, built on first use.
func buildReloader(t *testing.T) string {
	t.Helper()
	bin, err := reloaderBinary()
	testutil.Must(t, err)
	return bin
}

// settled is the wait before a negative check ("no late duplicate", "nothing else rolled"):
// it returns once every reloader named (host:port, or a URL of it or of its /metrics) has
// nothing queued, running or waiting and none of its counters has moved for
// testutil.QuietFor; a positive signal in place of a fixed sleep.
func settled(t *testing.T, what string, addrs ...string) {
	t.Helper()
	urls := make([]string, len(addrs))
	for i, a := range addrs {
		a = strings.TrimSuffix(strings.TrimPrefix(a, "http://"), "/metrics")
		urls[i] = "http://" + a + "/metrics"
	}
	testutil.Settle(t, what, testutil.QuietMetrics(urls...))
}

// settledHolding is settled for a reloader that holds reloads for one of reasons (a
// quarantine): those waits are the state under test, not work in hand.
func settledHolding(t *testing.T, what, addr string, reasons ...string) {
	t.Helper()
	url := "http://" + strings.TrimSuffix(strings.TrimPrefix(addr, "http://"), "/metrics") + "/metrics"
	testutil.Settle(t, what, testutil.Quiet(func() (testutil.Metrics, error) {
		m, err := testutil.ScrapeMetrics(url)
		for series := range m {
			for _, r := range reasons {
				if strings.HasPrefix(series, "reloader_reloads_waiting{") && strings.Contains(series, `reason="`+r+`"`) {
					delete(m, series)
				}
			}
		}
		return m, err
	}))
}
