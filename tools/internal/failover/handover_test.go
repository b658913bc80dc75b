package failover_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testenv/proc"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/tools/internal/failover"
)

// Hand-over bounds of --shards, measured as `make bench-failover` does (this package's Run):
// 3 replicas x 12 shards x 12 namespaces, lease 4s, renew 3s, retry 500ms. A replica stopped
// (SIGTERM), one joining, and one killed (SIGKILL), each with the ConfigMaps of the moved
// namespaces changed at once, with the API server applying shard selectors and not.
//
// The targets are: after SIGKILL, the shards held by survivors within lease + 2s and the
// changes reloaded within lease + 3s; after a stop or a join, the changes reloaded within 2s.
// A busy 2-core CI machine shares its cores with the control plane and four reloaders, so the
// assertions give 4s of margin on each: lease + 6s, lease + 7s and 5s. The shards must also
// not be taken before the killed replica's Leases could have expired (its last renewal was
// at most a retry period before the kill). Typical figures (printed with -v) are well inside
// the targets: about 0.6s to hold and 1s to reload after a stop or join, and lease to
// lease + 0.1s after a kill.
func TestShardHandOverBounds(t *testing.T) {
	bin, err := proc.Build("../../../cmd/reloader", t.TempDir())
	testutil.Must(t, err)
	for _, gate := range []bool{false, true} {
		t.Run(fmt.Sprintf("ShardedListAndWatch=%v", gate), func(t *testing.T) { testHandOver(t, bin, gate) })
	}
}

func testHandOver(t *testing.T, bin string, gate bool) {
	const lease, renew, retry = 4 * time.Second, 3 * time.Second, 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cluster, err := testenv.Start(ctx, testenv.Options{APIServerFlags: map[string]string{
		"feature-gates": "ShardedListAndWatch=" + strconv.FormatBool(gate)}})
	testutil.Must(t, err)
	t.Cleanup(func() { _ = cluster.Stop() })
	out := &proc.Output{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(out.String())
		}
	})
	results, err := failover.Run(ctx, failover.Config{Bin: bin, Config: cluster.Config, Kubeconfig: cluster.Kubeconfig,
		Replicas: 3, Shards: 12, Namespaces: 12, Lease: lease, Renew: renew, Retry: retry, Out: out, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 3 {
		t.Fatalf("%d hand-overs measured, want stop, join and kill", len(results))
	}
	for _, r := range results {
		t.Log(r)
		if r.Shards == 0 || r.Namespaces == 0 {
			t.Errorf("%s: nothing moved (%d shards, %d namespaces): the measure is empty", r.Scenario, r.Shards, r.Namespaces)
		}
		if r.Missed > 0 {
			t.Errorf("%s: %d changes of %d never reloaded", r.Scenario, r.Missed, r.Namespaces)
		}
		switch r.Scenario {
		case "kill":
			if r.Taken < lease-retry {
				t.Errorf("kill: shards taken %v after SIGKILL, before the dead replica's Leases could expire (%v)", r.Taken, lease-retry)
			}
			if r.Taken > lease+6*time.Second { // target lease + 2s
				t.Errorf("kill: shards held by survivors %v after SIGKILL, want within %v", r.Taken, lease+6*time.Second)
			}
			if r.Max() > lease+7*time.Second { // target lease + 3s
				t.Errorf("kill: changes reloaded up to %v after the change, want within %v", r.Max(), lease+7*time.Second)
			}
		default:
			if r.Max() > 5*time.Second { // target 2s
				t.Errorf("%s: changes in the moved namespaces reloaded up to %v after the change, want within 5s", r.Scenario, r.Max())
			}
		}
	}
}
