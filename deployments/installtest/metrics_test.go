package installtest

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/reloader-operator/reloader/deployments/render"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// sample sums the values of the samples of metric whose labels contain every one of labels
// (each written as in the exposition, `key="value"`).
func sample(exposition, metric string, labels ...string) float64 {
	var sum float64
	for _, line := range strings.Split(exposition, "\n") {
		name, rest := sampleName(line)
		if name != metric {
			continue
		}
		if !allIn(rest, labels) {
			continue
		}
		fields := strings.Fields(rest[strings.LastIndex(rest, "}")+1:])
		if len(fields) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
			sum += v
		}
	}
	return sum
}

func allIn(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// sampleName splits an exposition line into its metric name and the rest; comments and blank
// lines have no name.
func sampleName(line string) (string, string) {
	if line == "" || line[0] == '#' {
		return "", ""
	}
	end := strings.IndexAny(line, "{ ")
	if end < 0 {
		return "", ""
	}
	return line[:end], line[end:]
}

// exposedNames are the sample names in /metrics (a histogram's _bucket, _sum and _count each).
func exposedNames(exposition string) map[string]bool {
	names := map[string]bool{}
	for _, line := range strings.Split(exposition, "\n") {
		if name, _ := sampleName(line); name != "" {
			names[name] = true
		}
	}
	return names
}

// observabilityValues turn on the chart's optional Grafana dashboard and PrometheusRule.
var observabilityValues = reloaderValues(map[string]any{
	"grafanaDashboard": map[string]any{"enabled": true},
	"prometheusRule":   map[string]any{"enabled": true},
})

// checkDashboardMetrics renders the install's values with the dashboard and the rules on (as
// for a cluster serving the Prometheus Operator's API; the objects are only read) and checks
// that every metric they query is in the exposition of a running, reloading reloader.
func checkDashboardMetrics(t *testing.T, in install, release, namespace, exposition string) {
	t.Helper()
	values := mergeValues(in.values, observabilityValues)
	objs, err := render.Chart(chartDir, values, release, namespace, "monitoring.coreos.com/v1")
	testutil.Must(t, err)
	queries, err := render.Queries(objs)
	testutil.Must(t, err)
	if render.Find(objs, "PrometheusRule", "") == nil || len(queries) == 0 {
		t.Fatalf("no dashboard or PrometheusRule queries in the chart rendered with %v", observabilityValues)
	}
	exposed := exposedNames(exposition)
	names := render.MetricNames(queries)
	for _, name := range names {
		if !exposed[name] {
			var users []string
			for _, q := range queries {
				if slices.Contains(render.MetricNames([]string{q}), name) {
					users = append(users, q)
				}
			}
			t.Errorf("metric %s is not in reloader's /metrics; queried by:\n  %s", name, strings.Join(users, "\n  "))
		}
	}
	t.Logf("all %d metrics queried by the dashboard and rules are exposed: %s", len(names), strings.Join(names, " "))
}

// mergeValues overlays b on a, recursively, without changing either.
func mergeValues(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if bm, ok := v.(map[string]any); ok {
			if am, ok := out[k].(map[string]any); ok {
				out[k] = mergeValues(am, bm)
				continue
			}
		}
		out[k] = v
	}
	return out
}
