package render

import (
	"slices"
	"testing"
)

func TestMetricNames(t *testing.T) {
	got := MetricNames([]string{
		`sum by (success) (rate(reloader_reload_executed_total{namespace=~"$namespace",success="false"}[5m]))`,
		`histogram_quantile(0.99, sum by (le, controller) (rate(controller_runtime_reconcile_time_seconds_bucket[5m])))`,
		`absent(leader_election_master_status{name="lock"} == 1) and on (job) up > 1e3`,
		`min(reloader_caches_synced) < 1 or vector(0)`,
	})
	want := []string{"controller_runtime_reconcile_time_seconds_bucket", "leader_election_master_status", "reloader_caches_synced", "reloader_reload_executed_total", "up"}
	if !slices.Equal(got, want) {
		t.Errorf("MetricNames = %v, want %v", got, want)
	}
}
