package installtest

import (
	"slices"
	"testing"
)

func TestMetricNamesOfPromQL(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum(rate(reloader_reload_executed_total{success="false", namespace=~"$namespace"}[5m])) by (namespace) > 0`:       {"reloader_reload_executed_total"},
		`histogram_quantile(0.99, sum by (le, kind) (rate(reloader_reconcile_duration_seconds_bucket[$__rate_interval])))`: {"reloader_reconcile_duration_seconds_bucket"},
		`max(leader_election_master_status{name="x"}) == 0 and on(job) up`:                                                 {"leader_election_master_status", "up"},
		`label_values(reloader_reconcile_total, kind)`:                                                                     {"reloader_reconcile_total"},
		`increase(workqueue_retries_total[1h]) / ignoring(x) group_left workqueue_adds_total offset 5m`:                    {"workqueue_retries_total", "workqueue_adds_total"},
		`absent(controller_runtime_active_workers) or vector(0) * 1e3`:                                                     {"controller_runtime_active_workers"},
	} {
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("metricNames(%s) = %q, want %q", expr, got, want)
		}
	}
}

func TestExposition(t *testing.T) {
	text := `# HELP reloader_reload_executed_total Reloads.
# TYPE reloader_reload_executed_total counter
reloader_reload_executed_total{success="false"} 1
reloader_reload_executed_total{success="true"} 5
go_goroutines 42
x_bucket{le="+Inf"} 3
`
	if got := sample(text, "reloader_reload_executed_total", `success="true"`); got != 5 {
		t.Errorf("success=true: %v", got)
	}
	if got := sample(text, "reloader_reload_executed_total"); got != 6 {
		t.Errorf("all: %v", got)
	}
	names := exposedNames(text)
	for _, n := range []string{"reloader_reload_executed_total", "go_goroutines", "x_bucket"} {
		if !names[n] {
			t.Errorf("%s not found", n)
		}
	}
	if len(names) != 3 {
		t.Errorf("names %v", names)
	}
}
