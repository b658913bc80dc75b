package installtest

import (
	"encoding/json"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/reloader-operator/reloader/deployments/render"
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

var (
	promStrings   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promMatchers  = regexp.MustCompile(`\{[^{}]*\}`)
	promRanges    = regexp.MustCompile(`\[[^\[\]]*\]`)
	promGrouping  = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	grafanaVars   = regexp.MustCompile(`\$\{[^}]*\}|\$\w+`)
	labelValues   = regexp.MustCompile(`label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)?[^()]*\)`)
	promIdent     = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	promNotMetric = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true,
		"group_right": true, "and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true}
)

// metricNames are the metric names a PromQL expression (or a Grafana query around one)
// reads: identifiers that are not functions, keywords, label names or variables.
func metricNames(expr string) []string {
	expr = labelValues.ReplaceAllString(expr, " $1 ")
	expr = promStrings.ReplaceAllString(expr, " ")
	expr = promMatchers.ReplaceAllString(expr, " ")
	expr = promRanges.ReplaceAllString(expr, " ")
	expr = grafanaVars.ReplaceAllString(expr, " ")
	for prev := ""; prev != expr; { // grouping clauses may hold nothing nested; repeat for chains
		prev = expr
		expr = promGrouping.ReplaceAllString(expr, " ")
	}
	var names []string
	for _, loc := range promIdent.FindAllStringIndex(expr, -1) {
		id := expr[loc[0]:loc[1]]
		if promNotMetric[strings.ToLower(id)] || (loc[0] > 0 && isDigit(expr[loc[0]-1])) {
			continue // a keyword, or the unit of a number such as 5m or 1e3
		}
		if rest := strings.TrimLeft(expr[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") {
			continue // a function or an aggregation
		}
		if !slices.Contains(names, id) {
			names = append(names, id)
		}
	}
	return names
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' || b == '.' }

// queriedMetrics are the metric names that the rendered Grafana dashboards (ConfigMaps whose
// data holds a dashboard's JSON) and PrometheusRules query, each with where it is used.
func queriedMetrics(objs []*unstructured.Unstructured) map[string][]string {
	out := map[string][]string{}
	add := func(where, expr string) {
		for _, n := range metricNames(expr) {
			out[n] = append(out[n], where)
		}
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "ConfigMap":
			data, _, _ := unstructured.NestedStringMap(o.Object, "data")
			for key, text := range data {
				var dashboard any
				if json.Unmarshal([]byte(text), &dashboard) != nil {
					continue
				}
				walkQueries(dashboard, func(expr string) { add("dashboard "+o.GetName()+"/"+key, expr) })
			}
		case "PrometheusRule":
			groups, _, _ := unstructured.NestedSlice(o.Object, "spec", "groups")
			for _, g := range groups {
				rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
				for _, r := range rules {
					rule := r.(map[string]any)
					name, _ := rule["alert"].(string)
					if name == "" {
						name, _ = rule["record"].(string)
					}
					expr, _ := rule["expr"].(string)
					add("rule "+name, expr)
				}
			}
		}
	}
	return out
}

// walkQueries calls f with every PromQL expression of a Grafana dashboard: targets' expr and
// template variables' query.
func walkQueries(v any, f func(string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && (k == "expr" || (k == "query" && strings.Contains(s, "("))) {
				f(s)
				continue
			}
			if q, ok := x.(map[string]any); ok && k == "query" {
				if s, ok := q["query"].(string); ok {
					f(s)
				}
				continue
			}
			walkQueries(x, f)
		}
	case []any:
		for _, x := range v {
			walkQueries(x, f)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// observabilityValues turn on the chart's optional Grafana dashboard and PrometheusRule.
var observabilityValues = map[string]any{
	"grafanaDashboard": map[string]any{"enabled": true},
	"prometheusRule":   map[string]any{"enabled": true},
}

// checkDashboardMetrics renders the install's values with the dashboard and the rules on
// (their APIs need not exist: the objects are only read) and checks that every metric they
// query is in the exposition of a running, reloading reloader.
func checkDashboardMetrics(t *testing.T, in install, release, namespace, exposition string) {
	t.Helper()
	values := mergeValues(in.values, observabilityValues)
	objs, err := render.Chart(chartDir, values, release, namespace)
	if err != nil {
		t.Fatal(err)
	}
	queried := queriedMetrics(objs)
	if len(queried) == 0 {
		t.Fatalf("no dashboard or PrometheusRule query found in the chart rendered with %v", observabilityValues)
	}
	exposed := exposedNames(exposition)
	for _, name := range sortedKeys(queried) {
		if !exposed[name] {
			t.Errorf("metric %s (queried by %s) is not in reloader's /metrics", name, strings.Join(slices.Compact(queried[name]), ", "))
		}
	}
	t.Logf("all %d metrics queried by the dashboard and rules are exposed: %s", len(queried), strings.Join(sortedKeys(queried), " "))
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
