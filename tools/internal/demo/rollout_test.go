package demo_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/reloader-operator/reloader/internal/testenv/proc"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/tools/internal/demo"
)

// TestConfigMapChangeRollsTheDeploymentToNewPods runs the demo as `make demo` does: the
// Deployment rolls once on a ConfigMap change, explain shows it, the flap breaker quarantines
// the ConfigMap two writers fight over, and all of it reads in at most 40 lines with no
// WARNING (reloader runs with a namespace of its own, as installed).
func TestConfigMapChangeRollsTheDeploymentToNewPods(t *testing.T) {
	t.Parallel() // its own control plane and reloader
	bin, err := proc.Build("../../../cmd/reloader", t.TempDir())
	testutil.Must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var log bytes.Buffer
	res, err := demo.Run(ctx, demo.Options{ReloaderBinary: bin, Out: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if res.NewReplicaSet == res.OldReplicaSet {
		t.Errorf("no new ReplicaSet: %s", res.NewReplicaSet)
	}
	if !strings.HasPrefix(res.EnvVar, "STAKATER_DEMO_CONFIG_CONFIGMAP=") {
		t.Errorf("env var %q, want STAKATER_DEMO_CONFIG_CONFIGMAP=<hash>", res.EnvVar)
	}
	if res.ReloadsCounted != "1" {
		t.Errorf("reloader_reload_executed_total{success=\"true\"} = %s, want 1", res.ReloadsCounted)
	}

	printed := log.String()
	lines := strings.Split(strings.TrimRight(printed, "\n"), "\n")
	if len(lines) > 40 {
		t.Errorf("the demo printed %d lines, want at most 40", len(lines))
	}
	if strings.Contains(printed, "WARNING") {
		t.Errorf("the demo printed a WARNING")
	}
	// reloader's own decision shows; the manager's start and stop lines do not.
	if !strings.Contains(printed, "reloader | deployment demo/demo: reloaded source=configmap/demo-config") {
		t.Errorf("the demo did not print reloader's reload line")
	}
	if strings.Contains(printed, "Starting EventSource") {
		t.Errorf("the demo printed controller-runtime's start-up lines")
	}
	// explain's report of the Deployment: its header, and the ConfigMap as a source that
	// reloads it, unchanged since the reload.
	if !strings.Contains(res.Explain, "Deployment demo/demo") || !strings.Contains(res.Explain, "configmap/demo-config") {
		t.Errorf("explain's output does not report Deployment demo/demo and its ConfigMap:\n%s", res.Explain)
	}
	for _, want := range []string{"==> reloader explain deployment/demo -n demo", "    Deployment demo/demo"} {
		if !strings.Contains(printed, want) {
			t.Errorf("the demo did not print %q", want)
		}
	}
	// The guardrail: the Event names the ConfigMap's two writers, and the demo prints it.
	for _, writer := range []string{"ci-pipeline", "kubectl-edit"} {
		if !strings.Contains(res.Quarantine, writer) {
			t.Errorf("the SourceQuarantined Event does not name %s: %q", writer, res.Quarantine)
		}
	}
	if !strings.Contains(printed, "    Warning SourceQuarantined deployment/demo: "+res.Quarantine) {
		t.Errorf("the demo did not print the SourceQuarantined Event")
	}
	if t.Failed() {
		t.Log(printed)
	}
}
