package chart_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/reloader-operator/reloader/deployments/render"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// TestMonitoringMetrics lists the metrics the dashboard and the alerts query. The install
// proof checks each against a running reloader's /metrics; this pins the list, so a change to
// the dashboard or rules is a reviewed change of it.
func TestMonitoringMetrics(t *testing.T) {
	objs := renderChart(t, `reloader: {enableHA: true, grafanaDashboard: {enabled: true}, prometheusRule: {enabled: true}}`)
	if render.Find(objs, "ConfigMap", fullname+"-dashboard") == nil || render.Find(objs, "PrometheusRule", fullname) == nil {
		t.Fatal("dashboard ConfigMap or PrometheusRule not rendered")
	}
	queries, err := render.Queries(objs)
	testutil.Must(t, err)
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
	testutil.Must(t, err)
	if slices.Contains(render.MetricNames(queries), "leader_election_master_status") {
		t.Error("the rules query leader_election_master_status without HA")
	}
}

// The hash-key alert is rendered exactly when reloader uses the install key, which the RBAC
// on the key Secret says: for Secret hashes, and for Job replacement records when Jobs are
// reloaded (with Secrets ignored too).
func TestHashKeyAlertFollowsTheKey(t *testing.T) {
	for _, tc := range []struct {
		name, values string
		want         bool
	}{
		{"default", `reloader: {prometheusRule: {enabled: true}}`, true},
		{"Secrets ignored, Jobs reloaded", `reloader: {ignoreSecrets: true, reloadJobs: true, prometheusRule: {enabled: true}}`, true},
		{"Secrets ignored, Job reloads off", `reloader: {ignoreSecrets: true, reloadJobs: false, prometheusRule: {enabled: true}}`, false},
		{"Secrets ignored, Jobs reloaded (the default)", `reloader: {ignoreSecrets: true, prometheusRule: {enabled: true}}`, true},
		{"Secrets and Jobs ignored", `reloader: {ignoreSecrets: true, reloadJobs: true, ignoreJobs: true, prometheusRule: {enabled: true}}`, false},
		{"Secrets ignored, webhook", `reloader: {ignoreSecrets: true, webhookUrl: "https://h.example/x", prometheusRule: {enabled: true}}`, false},
		{"Jobs ignored", `reloader: {ignoreJobs: true, prometheusRule: {enabled: true}}`, true},
	} {
		objs := renderChart(t, tc.values)
		rule := render.Find(objs, "PrometheusRule", fullname)
		if rule == nil {
			t.Fatalf("%s: no PrometheusRule", tc.name)
		}
		alerts := map[string]bool{}
		groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
		for _, g := range groups {
			rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
			for _, r := range rules {
				name, _, _ := unstructured.NestedString(r.(map[string]any), "alert")
				alerts[name] = true
			}
		}
		if !alerts["ReloaderReloadFailures"] {
			t.Fatalf("%s: alerts %v, not read right", tc.name, alerts)
		}
		granted := false
		for _, o := range objs {
			if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
				continue
			}
			var r rbacv1.Role
			fromUnstructured(t, o, &r)
			for _, pr := range r.Rules {
				granted = granted || slices.Contains(pr.ResourceNames, "reloader-hash-key")
			}
		}
		if alerts["ReloaderHashKeyFallback"] != tc.want || granted != tc.want {
			t.Errorf("%s: hash-key alert %v, key granted %v; want both %v", tc.name, alerts["ReloaderHashKeyFallback"], granted, tc.want)
		}
	}
}

// Under secureMetrics /metrics answers only a token allowed to get it, and a PodMonitor sends
// one only from bearerTokenSecret: without it the chart refuses to render rather than ship a
// PodMonitor whose every scrape gets 401.
func TestPodMonitorWithSecureMetricsNeedsAToken(t *testing.T) {
	_, err := renderValues(values(t, `reloader: {secureMetrics: true, podMonitor: {enabled: true}}`))
	if err == nil || !strings.Contains(err.Error(), "bearerTokenSecret") {
		t.Fatalf("secureMetrics and a PodMonitor without a token: %v, want an error naming bearerTokenSecret", err)
	}
	objs := renderChart(t, `reloader: {secureMetrics: true, podMonitor: {enabled: true, bearerTokenSecret: {name: scraper-token, key: token}}}`)
	pm := render.Find(objs, "PodMonitor", fullname)
	if pm == nil {
		t.Fatal("no PodMonitor")
	}
	endpoints, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	if len(endpoints) != 1 {
		t.Fatalf("endpoints %v", endpoints)
	}
	ep := endpoints[0].(map[string]any)
	scheme, _, _ := unstructured.NestedString(ep, "scheme")
	name, _, _ := unstructured.NestedString(ep, "bearerTokenSecret", "name")
	key, _, _ := unstructured.NestedString(ep, "bearerTokenSecret", "key")
	if scheme != "https" || name != "scraper-token" || key != "token" {
		t.Errorf("endpoint %v: want https with the token from scraper-token/token", ep)
	}
	// Without secureMetrics no token is needed.
	if render.Find(renderChart(t, `reloader: {podMonitor: {enabled: true}}`), "PodMonitor", fullname) == nil {
		t.Error("no PodMonitor without secureMetrics")
	}
}

// The dashboard and the alerts look at this release's pods only: every metric they select
// is restricted to the release's namespace and to pods named after its Deployment, so that a
// second reloader, or anything else, in the namespace doesn't count.
func TestMonitoringSelectsTheReleasePods(t *testing.T) {
	objs := renderRelease(t, `reloader: {enableHA: true, grafanaDashboard: {enabled: true}, prometheusRule: {enabled: true}}`, "cfg", "ops")
	var queries []string
	dash := render.Find(objs, "ConfigMap", "cfg-reloader-dashboard")
	text, _, _ := unstructured.NestedString(dash.Object, "data", "reloader.json")
	var board struct {
		Templating struct {
			List []struct{ Name, Type, Query string }
		}
	}
	testutil.Must(t, json.Unmarshal([]byte(text), &board))
	vars := map[string]string{}
	for _, v := range board.Templating.List {
		if v.Type == "constant" {
			vars["$"+v.Name] = v.Query
		}
	}
	dashQueries, err := render.Queries([]*unstructured.Unstructured{dash})
	testutil.Must(t, err)
	for _, q := range dashQueries {
		for name, value := range vars {
			q = strings.ReplaceAll(q, name, value)
		}
		queries = append(queries, q)
	}
	ruleQueries, err := render.Queries([]*unstructured.Unstructured{render.Find(objs, "PrometheusRule", "cfg-reloader")})
	testutil.Must(t, err)
	queries = append(queries, ruleQueries...)
	if len(dashQueries) == 0 || len(ruleQueries) == 0 {
		t.Fatalf("%d dashboard and %d rule queries", len(dashQueries), len(ruleQueries))
	}

	matchers := regexp.MustCompile(`\{([^}]*)\}`)
	podMatcher := regexp.MustCompile(`pod=~"([^"]*)"`)
	for _, q := range queries {
		for _, name := range render.MetricNames([]string{q}) {
			if !strings.Contains(q, name+"{") {
				t.Errorf("%s: metric %s selected without label matchers", q, name)
			}
		}
		for _, m := range matchers.FindAllStringSubmatch(q, -1) {
			if !strings.Contains(m[1], `namespace="ops"`) {
				t.Errorf("%s: selector {%s} is not restricted to namespace ops", q, m[1])
			}
			pm := podMatcher.FindStringSubmatch(m[1])
			if pm == nil {
				t.Errorf("%s: selector {%s} has no pod matcher", q, m[1])
				continue
			}
			re := regexp.MustCompile("^(?:" + pm[1] + ")$") // PromQL anchors its regular expressions
			if !re.MatchString("cfg-reloader-7d4f9c8b5-x2x9q") || re.MatchString("web-7d4f9c8b5-x2x9q") || re.MatchString("cfg-7d4f9c8b5-x2x9q") {
				t.Errorf("%s: pod=~%q does not select exactly the release's pods", q, pm[1])
			}
		}
	}
}
