package main

import (
	"strings"
	"testing"
	"time"

	"github.com/reloader-operator/reloader/internal/testutil"
)

// Upstream v2's and PR 1206's flags, as a user or upstream's chart writes them, parse through
// the command itself (cobra, and the joining of boolean values).
func TestUpstreamV2AndLeaderElectionFlags(t *testing.T) {
	o, err := parseAsCommand(t, "--enable-argo-rollouts", "true", "--is-openshift", "false",
		"--leader-election-lease-duration=30s", "--leader-election-renew-deadline=20s", "--leader-election-retry-period=4s",
		"--leader-election-id=reloader-leader-election", "--leader-election-namespace=ops",
		"--metrics-addr=:9090", "--health-addr=:8080", "--log-level=warn")
	testutil.Must(t, err)
	if !o.IsArgoRollouts || o.OpenShift == nil || *o.OpenShift || o.WatchesDeploymentConfigs(true) {
		t.Errorf("argo %v openshift %v", o.IsArgoRollouts, o.OpenShift)
	}
	if o.LeaseDuration != 30*time.Second || o.LeaseRenewDeadline != 20*time.Second || o.LeaseRetryPeriod != 4*time.Second ||
		o.LeaderElectionID != "reloader-leader-election" || o.LeaderElectionNamespace != "ops" || o.HealthAddr != ":8080" {
		t.Errorf("parsed %+v", o.Options)
	}
	_, err = parseAsCommand(t, "--leader-election-lease-duration=15.5s")
	if err == nil || !strings.Contains(err.Error(), "--leader-election-lease-duration: 15.5s is not a whole number of seconds") {
		t.Errorf("fractional lease: %v", err)
	}
}
