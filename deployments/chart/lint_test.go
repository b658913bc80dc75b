package chart_test

import (
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
)

// TestLint runs Helm's own linter (`helm lint`) over every values set of the matrix.
func TestLint(t *testing.T) {
	for _, m := range matrix {
		t.Run(m.name, func(t *testing.T) {
			result := lint.All(chartDir(), values(t, m.values), namespace, false)
			for _, msg := range result.Messages {
				if msg.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", msg)
				} else {
					t.Logf("helm lint: %s", msg)
				}
			}
		})
	}
}

// TestSchemaRejects: values.schema.json turns a misspelt key or a wrong type into an error
// that names the key, instead of a value silently ignored.
func TestSchemaRejects(t *testing.T) {
	for _, tt := range []struct{ values, mention string }{
		{`reloader: {watchGlobaly: false}`, "watchGlobaly"},
		{`reloader: {enableHA: "yes"}`, "enableHA"},
		{`reloader: {deployment: {replicas: two}}`, "replicas"},
		{`reloader: {reloadStrategy: restart}`, "reloadStrategy"},
		{`reloader: {logFormat: xml}`, "logFormat"},
		{`reloader: {custom_annotations: {configmaps: x}}`, "configmaps"},
		{`reloader: {coalesceWindow: soon}`, "coalesceWindow"},
		{`reloader: {mode: ask}`, "mode"},
		{`reloader: {genericTargetKinds: [apps/deployment]}`, "genericTargetKinds"},
		{`reloader: {rolloutDeadline: 10}`, "rolloutDeadline"},
		{`reloader: {reconcileTimeout: soon}`, "reconcileTimeout"},
		{`reloader: {kubeAPIQPS: 0}`, "kubeAPIQPS"},
		{`reloader: {kubeAPIBurst: 1.5}`, "kubeAPIBurst"},
		{`reloader: {webhookUrl: "ftp://x"}`, "webhookUrl"},
		{`imge: {tag: v1}`, "imge"},
		{`reloader: {namespaces: 3}`, "namespaces"},
		{`reloader: {logLevel: loud}`, "logLevel"},
		{`reloader: {deployment: {hostUsers: "no"}}`, "hostUsers"},
		{`reloader: {serviceAccount: {automountServiceAccountToken: "no"}}`, "automountServiceAccountToken"},
		{`crds: {instal: false}`, "instal"},
		{`reloader: {leaderElection: {leaseDuration: 15}}`, "leaseDuration"},
		{`enterprize: {enabled: true}`, "enterprize"},
		{`enterprise: {enabled: "yes"}`, "enabled"},
		{`global: {host: 443}`, "host"},
	} {
		_, err := renderValues(values(t, tt.values))
		if err == nil {
			t.Errorf("%s: rendered, want a schema error", tt.values)
			continue
		}
		if !strings.Contains(err.Error(), tt.mention) {
			t.Errorf("%s: error does not name %q: %v", tt.values, tt.mention, err)
		}
		t.Logf("%s: %v", tt.values, err)
	}
}

// Ignoring both source kinds leaves nothing to watch: the chart refuses, as the binary would.
func TestIgnoreBothSourceKindsFails(t *testing.T) {
	_, err := renderValues(values(t, `reloader: {ignoreSecrets: true, ignoreConfigMaps: true}`))
	if err == nil || !strings.Contains(err.Error(), "ignoreConfigMaps") {
		t.Errorf("err = %v, want one naming ignoreSecrets and ignoreConfigMaps", err)
	}
}
