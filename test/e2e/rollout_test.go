// Package e2e runs the built reloader binary, as a user does, against a local cluster with
// real rollouts (controller-manager, scheduler and kwok nodes).
package e2e

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/reloader-operator/reloader/internal/devtools/demo"
)

func TestConfigMapChangeRollsTheDeploymentToNewPods(t *testing.T) {
	t.Parallel() // its own control plane and reloader
	bin := buildReloader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
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
	if t.Failed() {
		t.Log(log.String())
	}
}
