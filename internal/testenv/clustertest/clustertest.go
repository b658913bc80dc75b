// Package clustertest runs a package's tests against a local control plane. It is apart from
// testutil so that unit tests which use testutil do not link envtest.
package clustertest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// Main is the body of a TestMain against a real API server: it starts a local
// control plane, lets setup make the package's clients of it, runs the tests, stops the
// control plane and exits with the tests' code.
func Main(m *testing.M, opts testenv.Options, setup func(*testenv.Cluster) error) {
	cluster, err := testenv.Start(context.Background(), opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start control plane:", err)
		os.Exit(1)
	}
	if setup != nil {
		if err := setup(cluster); err != nil {
			fmt.Fprintln(os.Stderr, err)
			_ = cluster.Stop()
			os.Exit(1)
		}
	}
	code := m.Run()
	_ = cluster.Stop()
	os.Exit(code)
}

// InProcessMetrics reads the metrics of the reloaders this test process runs (app.New
// registers them on controller-runtime's registry), as testutil.Metrics: for
// testutil.Settle(t, what, testutil.Quiet(clustertest.InProcessMetrics)) before a negative
// check. The registry is the process's, so it waits for every reloader the process runs.
func InProcessMetrics() (testutil.Metrics, error) {
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		return nil, err
	}
	m := testutil.Metrics{}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			var v float64
			switch {
			case s.Counter != nil:
				v = s.Counter.GetValue()
			case s.Gauge != nil:
				v = s.Gauge.GetValue()
			case s.Untyped != nil:
				v = s.Untyped.GetValue()
			default:
				continue // histograms and summaries: their counts move with the counters
			}
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			series := f.GetName()
			if len(labels) > 0 {
				slices.Sort(labels)
				series += "{" + strings.Join(labels, ",") + "}"
			}
			m[series] = v
		}
	}
	return m, nil
}

// Settled is the wait before a negative check in a package that runs reloader in-process:
// it returns once every reloader of the process has nothing queued, running or waiting and
// its counters have been still for testutil.QuietFor. Make it follow a positive sign that
// the change under test got to reloader (SettledAfter, or a reload it also causes).
func Settled(t testing.TB) {
	t.Helper()
	testutil.Settle(t, "reloader", testutil.Quiet(InProcessMetrics))
}

// SettledAfter makes change, waits until the counter heard (such as
// reloader_events_received_total for a ConfigMap or Secret change) has moved, the proof
// that reloader received it, and then until reloader has Settled.
func SettledAfter(t testing.TB, heard string, change func()) {
	t.Helper()
	before, err := InProcessMetrics()
	testutil.Must(t, err)
	change()
	testutil.Eventually(t, heard+" moved", func() error {
		now, err := InProcessMetrics()
		if err != nil {
			return err
		}
		return testutil.Heard(before, now, heard)
	})
	Settled(t)
}
