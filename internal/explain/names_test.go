package explain

import (
	"strings"
	"testing"
)

func TestParseTarget(t *testing.T) {
	for arg, want := range map[string]string{
		"deployment/web":       "Deployment web",
		"Deployments/web":      "Deployment web",
		"deploy/web":           "Deployment web",
		"deployments.apps/web": "Deployment web",
		"sts/db":               "StatefulSet db",
		"ds/agent":             "DaemonSet agent",
		"cj/nightly":           "CronJob nightly",
		"jobs/once":            "Job once",
		"ro/canary":            "Rollout canary",
		"dc/legacy":            "DeploymentConfig legacy",
		"cm/app-config":        "configmap app-config",
		"secrets/db":           "secret db",
	} {
		got, err := ParseTarget(arg)
		if err != nil {
			t.Errorf("%s: %v", arg, err)
			continue
		}
		kind := string(got.Source)
		if got.Workload != nil {
			kind = got.Workload.Name()
		}
		if kind+" "+got.Name != want {
			t.Errorf("%s: %s %s, want %s", arg, kind, got.Name, want)
		}
	}
	for arg, wantErr := range map[string]string{
		"web":                            "want <kind>/<name>",
		"deployment/":                    "want <kind>/<name>",
		"deployment/a/b":                 "want <kind>/<name>",
		"pods/web":                       "unknown kind",
		"deployment/Web_1":               "not an object name",
		"cm/" + strings.Repeat("a", 300): "not an object name",
	} {
		if _, err := ParseTarget(arg); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%.40s: %v, want an error with %q", arg, err, wantErr)
		}
	}
}
