package chart_test

import (
	"slices"
	"testing"

	"github.com/reloader-operator/reloader/deployments/render"
)

// TestMonitoringMetrics lists the metrics the dashboard and the alerts query. The install
// proof checks each against a running reloader's /metrics; this pins the list, so a change to
// the dashboard or rules is a reviewed change of it.
func TestMonitoringMetrics(t *testing.T) {
	objs := renderChart(t, `reloader: {enableHA: true, grafanaDashboard: {enabled: true}, prometheusRule: {enabled: true}}`)
	if render.Find(objs, "ConfigMap", release+"-dashboard") == nil || render.Find(objs, "PrometheusRule", release) == nil {
		t.Fatal("dashboard ConfigMap or PrometheusRule not rendered")
	}
	queries, err := render.Queries(objs)
	if err != nil {
		t.Fatal(err)
	}
	got := render.MetricNames(queries)
	want := []string{
		"controller_runtime_reconcile_errors_total",
		"controller_runtime_reconcile_time_seconds_bucket",
		"controller_runtime_reconcile_total",
		"go_goroutines",
		"leader_election_master_status",
		"process_cpu_seconds_total",
		"process_resident_memory_bytes",
		"reloader_caches_synced",
		"reloader_hash_key_fallback",
		"reloader_reload_executed_total",
		"rest_client_requests_total",
		"workqueue_depth",
	}
	if !slices.Equal(got, want) {
		t.Errorf("metrics queried:\n  %v\nwant\n  %v", got, want)
	}
}

func TestMonitoringOffByDefault(t *testing.T) {
	objs := renderChart(t, ``)
	for _, kind := range []string{"PrometheusRule", "ServiceMonitor", "PodMonitor", "PodDisruptionBudget", "NetworkPolicy", "Service", "Secret"} {
		if n := len(render.OfKind(objs, kind)); n != 0 {
			t.Errorf("%d %s rendered by default", n, kind)
		}
	}
	if render.Find(objs, "ConfigMap", "") != nil {
		t.Error("a ConfigMap (dashboard) is rendered by default")
	}
}

// The no-leader alert exists only with HA, where controller-runtime exports the Lease gauge.
func TestNoLeaderAlertOnlyWithHA(t *testing.T) {
	queries, err := render.Queries(renderChart(t, `reloader: {prometheusRule: {enabled: true}}`))
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(render.MetricNames(queries), "leader_election_master_status") {
		t.Error("the rules query leader_election_master_status without HA")
	}
}
