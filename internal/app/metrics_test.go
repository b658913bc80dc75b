package app_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// sample is one line of a Prometheus text exposition.
type sample struct {
	name   string
	labels map[string]string
	value  string
}

// parseExposition reads the samples of a text exposition; histogram series keep their
// _bucket, _sum and _count names.
func parseExposition(t *testing.T, body string) []sample {
	t.Helper()
	var out []sample
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s := sample{labels: map[string]string{}}
		rest := line
		if i := strings.IndexByte(line, '{'); i >= 0 {
			s.name = line[:i]
			end := strings.LastIndexByte(line, '}')
			for pairs := line[i+1 : end]; pairs != ""; {
				key, after, _ := strings.Cut(pairs, `="`)
				var value strings.Builder
				j := 0
				for ; j < len(after) && after[j] != '"'; j++ {
					if after[j] == '\\' {
						j++
					}
					value.WriteByte(after[j])
				}
				s.labels[key] = value.String()
				pairs = strings.TrimPrefix(after[j+1:], ",")
			}
			rest = line[end+1:]
		} else {
			s.name, rest, _ = strings.Cut(line, " ")
		}
		s.value = strings.Fields(rest)[0]
		out = append(out, s)
	}
	return out
}

// labelNames lists the label names of a metric's series (le of histogram buckets left out),
// or nil when the metric is not exposed.
func labelNames(samples []sample, name string) []string {
	var names []string
	found := false
	for _, s := range samples {
		if s.name != name && s.name != name+"_bucket" && s.name != name+"_count" {
			continue
		}
		found = true
		for k := range s.labels {
			if k != "le" && !slices.Contains(names, k) {
				names = append(names, k)
			}
		}
	}
	if !found {
		return nil
	}
	sort.Strings(names)
	return append([]string{}, names...)
}

func hasSample(samples []sample, name string, labels map[string]string) bool {
	return slices.ContainsFunc(samples, func(s sample) bool {
		if s.name != name {
			return false
		}
		for k, v := range labels {
			if s.labels[k] != v {
				return false
			}
		}
		return true
	})
}

// A dashboard or alert built on upstream's metrics keeps working: every upstream name
// reloader fills is on /metrics with upstream's label names, and carries real values after
// a reload and a no-op update.
func TestUpstreamMetricNamesKeepUpstreamLabels(t *testing.T) {
	ctx := context.Background()
	k8s, err := client.New(restConfig, client.Options{})
	testutil.Must(t, err)
	ns := "upstream-metrics"
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}, Data: map[string]string{"k": "v1"}}
	d := autoDeployment(ns, "web", "cfg")
	for _, o := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, cm, d} {
		testutil.Must(t, k8s.Create(ctx, o))
	}

	opts := options.Default()
	opts.MetricsAddr = freeAddr(t)
	opts.Namespaces = []string{ns}
	// The latency histograms time from a change the coalescing window saw; with
	// --coalesce-window=0 there is none.
	opts.CoalesceWindow = 100 * time.Millisecond
	opts.MetricsCountByNamespace = true
	start(t, opts)
	testutil.Eventually(t, "/ready 200", testutil.Cond(func() (bool, error) {
		code, _ := httpGet(opts.MetricsAddr, "/ready")
		return code == http.StatusOK, nil
	}))
	scrape := func() []sample {
		code, body := httpGet(opts.MetricsAddr, "/metrics")
		if code != http.StatusOK {
			t.Fatalf("/metrics = %d", code)
		}
		return parseExposition(t, body)
	}
	if !hasSample(scrape(), "reloader_caches_synced", nil) {
		t.Fatal("reloader_caches_synced not exposed")
	}
	for _, s := range scrape() {
		if s.name == "reloader_caches_synced" && s.value != "1" {
			t.Errorf("reloader_caches_synced = %s once /ready is ok", s.value)
		}
	}

	testutil.Eventually(t, "recorded", testutil.Cond(func() (bool, error) {
		_ = k8s.Get(ctx, client.ObjectKeyFromObject(d), d)
		return d.Annotations["reloader.dev/source-hashes"] != "", nil
	}))
	cm.Data["k"] = "v2"
	testutil.Must(t, k8s.Update(ctx, cm))
	testutil.Eventually(t, "reloaded", testutil.Cond(func() (bool, error) {
		_ = k8s.Get(ctx, client.ObjectKeyFromObject(d), d)
		return len(d.Spec.Template.Spec.Containers[0].Env) == 1, nil
	}))
	cm.Labels = map[string]string{"touched": "yes"} // no content change: upstream's no_data_change
	testutil.Must(t, k8s.Update(ctx, cm))

	want := map[string][]string{
		"reloader_reload_executed_total":              {"success"},
		"reloader_reload_executed_total_by_namespace": {"namespace", "success"},
		"reloader_reconcile_total":                    {"result"},
		"reloader_reconcile_duration_seconds":         {"result"},
		"reloader_action_total":                       {"result", "workload_kind"},
		"reloader_action_latency_seconds":             {"workload_kind"},
		"reloader_skipped_total":                      {"reason"},
		"reloader_errors_total":                       {"type"},
		"reloader_retries_total":                      {},
		"reloader_events_received_total":              {"event_type", "resource_type"},
		"reloader_workloads_scanned_total":            {"kind"},
		"reloader_workloads_matched_total":            {"kind"},
		"reloader_workqueue_depth":                    {},
		"reloader_workqueue_adds_total":               {},
		"reloader_workqueue_latency_seconds":          {},
		"reloader_caches_synced":                      {},
		"rest_client_request_duration_seconds":        {"host", "verb"},
		// reloader's own series, under names of their own
		"reloader_workload_reconcile_total":            {"kind", "outcome"},
		"reloader_workload_reconcile_duration_seconds": {"kind"},
		"reloader_workload_action_total":               {"action", "kind"},
	}
	values := []struct {
		name   string
		labels map[string]string
	}{
		{"reloader_reload_executed_total_by_namespace", map[string]string{"success": "true", "namespace": ns}},
		{"reloader_reconcile_total", map[string]string{"result": "success"}},
		{"reloader_reconcile_duration_seconds_count", map[string]string{"result": "success"}},
		{"reloader_action_total", map[string]string{"workload_kind": "Deployment", "result": "success"}},
		{"reloader_action_latency_seconds_count", map[string]string{"workload_kind": "Deployment"}},
		{"reloader_skipped_total", map[string]string{"reason": "no_data_change"}},
		// upstream counts an update without a content change as a skipped reconcile too
		{"reloader_reconcile_total", map[string]string{"result": "skipped"}},
		{"reloader_reconcile_duration_seconds_count", map[string]string{"result": "skipped"}},
		{"rest_client_request_duration_seconds_count", map[string]string{"verb": "PATCH"}},
		{"reloader_errors_total", map[string]string{"type": "handler_error"}},
		{"reloader_events_received_total", map[string]string{"event_type": "add", "resource_type": "configmaps"}},
		{"reloader_events_received_total", map[string]string{"event_type": "update", "resource_type": "configmaps"}},
		{"reloader_workloads_scanned_total", map[string]string{"kind": "Deployment"}},
		{"reloader_workloads_matched_total", map[string]string{"kind": "Deployment"}},
	}
	var samples []sample
	missing := func() []string {
		var out []string
		for _, v := range values {
			if !hasSample(samples, v.name, v.labels) {
				out = append(out, fmt.Sprint(v.name, v.labels))
			}
		}
		return out
	}
	deadline := time.Now().Add(20 * time.Second)
	for samples = scrape(); len(missing()) > 0 && time.Now().Before(deadline); samples = scrape() {
		time.Sleep(100 * time.Millisecond)
	}
	if m := missing(); len(m) > 0 {
		t.Errorf("series without a value: %v", m)
	}
	for name, labels := range want {
		got := labelNames(samples, name)
		if got == nil {
			t.Errorf("%s not exposed", name)
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(labels) {
			t.Errorf("%s labels %v, want upstream's %v", name, got, labels)
		}
	}
	for _, s := range samples {
		if r := s.labels["result"]; s.name == "reloader_reconcile_total" && r != "success" && r != "error" && r != "skipped" {
			t.Errorf("reloader_reconcile_total result %q is none of upstream's values", s.labels["result"])
		}
	}
}
