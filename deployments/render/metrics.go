package render

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Queries returns every PromQL expression in the rendered Grafana dashboards (ConfigMaps
// labelled grafana_dashboard) and PrometheusRules, so that a test can check each metric they
// use against a running reloader's /metrics.
func Queries(objs []*unstructured.Unstructured) ([]string, error) {
	var out []string
	for _, o := range objs {
		switch {
		case o.GetKind() == "ConfigMap" && o.GetLabels()["grafana_dashboard"] != "":
			data, _, _ := unstructured.NestedStringMap(o.Object, "data")
			for key, text := range data {
				var dash any
				if err := json.Unmarshal([]byte(text), &dash); err != nil {
					return nil, fmt.Errorf("dashboard %s/%s: %w", o.GetName(), key, err)
				}
				out = append(out, exprs(dash)...)
			}
		case o.GetKind() == "PrometheusRule":
			groups, _, _ := unstructured.NestedSlice(o.Object, "spec", "groups")
			for _, g := range groups {
				rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
				for _, r := range rules {
					if e, ok := r.(map[string]any)["expr"].(string); ok {
						out = append(out, e)
					}
				}
			}
		}
	}
	return out, nil
}

// exprs collects the values of every "expr" key in a decoded JSON document.
func exprs(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "expr" {
				out = append(out, s)
			} else {
				out = append(out, exprs(x)...)
			}
		}
	case []any:
		for _, x := range v {
			out = append(out, exprs(x)...)
		}
	}
	return out
}

var (
	// Label matchers, string literals and range or subquery selectors hold no metric names.
	promNoise = regexp.MustCompile(`\{[^}]*\}|"(?:[^"\\]|\\.)*"|\[[^\]]*\]`)
	// Grouping clauses list label names.
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promKeywords = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right", "inf", "nan"}
)

// MetricNames returns the sorted metric names that the PromQL expressions select. An
// identifier followed by "(" is a function or aggregation, not a metric; a histogram's
// _bucket, _sum and _count series keep their suffix.
func MetricNames(queries []string) []string {
	var out []string
	for _, q := range queries {
		q = promGrouping.ReplaceAllString(promNoise.ReplaceAllString(q, " "), " ")
		for _, loc := range promIdent.FindAllStringIndex(q, -1) {
			name := q[loc[0]:loc[1]]
			rest := q[loc[1]:]
			for len(rest) > 0 && rest[0] == ' ' {
				rest = rest[1:]
			}
			if len(rest) > 0 && rest[0] == '(' || slices.Contains(promKeywords, name) {
				continue
			}
			if loc[0] > 0 && (q[loc[0]-1] >= '0' && q[loc[0]-1] <= '9' || q[loc[0]-1] == '.') {
				continue // the exponent or suffix of a number
			}
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
