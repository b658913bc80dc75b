package scalebench

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/reloader-operator/reloader/internal/testenv/proc"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// The benchmark at a small scale, as `make bench-10k` runs it at 10,000 ConfigMaps: every
// figure is produced, and what the targets ask holds here too: no reload missed or repeated,
// no LIST after sync, one Deployment write per reload, the whole fan-out patched, the paced
// fan-out no faster than its rate.
func TestSmallRun(t *testing.T) {
	ctx, bin, out := smoke(t)
	f, err := Run(ctx, Config{Bin: bin, ConfigMaps: 200, Secrets: 40, Deployments: 150, Shared: 60, Namespaces: 3,
		SourceBytes: 10 << 10, Changes: 20, ChangeRate: 50, Workers: 16, Out: out,
		PacedArgs: []string{"--reload-rate=20", "--reload-burst=5"}, PacedRate: 20})
	testutil.Must(t, err)
	f.Print(testWriter{t})
	switch {
	case f.FirstSightWrites < 1 || f.FirstSightWrites > f.Objects.Deployments:
		// One write per namespace into the ledger of first records (3 here), at most one per
		// Deployment without it.
		t.Errorf("%d first-sight writes for %d Deployments in %d namespaces", f.FirstSightWrites, f.Objects.Deployments, 3)
	case f.Reloads == 0 || f.Reloads != f.Expected || f.Missed != 0 || f.Duplicates != 0:
		t.Errorf("%d reloads of %d expected, %d missed, %d duplicates", f.Reloads, f.Expected, f.Missed, f.Duplicates)
	case f.ListsAfter != 0:
		t.Errorf("%d LIST requests after sync", f.ListsAfter)
	case f.WritesPerReload > 1.0:
		t.Errorf("%.2f Deployment writes per reload", f.WritesPerReload)
	case f.FanOut.Patched != f.FanOut.Workloads:
		t.Errorf("fan-out: %d of %d patched", f.FanOut.Patched, f.FanOut.Workloads)
	case f.AfterSync.RSS == 0 || f.AfterSync.HeapInuse == 0:
		t.Errorf("memory not measured: %+v", f.AfterSync)
	case f.Paced == nil || f.Paced.Patched != f.Paced.Workloads || f.Paced.Rate > 1.5*20:
		t.Errorf("paced fan-out: %+v", f.Paced)
	}
}

// Two replicas sharing four shards, as `make bench-100k-sharded` runs four: each caches a part
// of the objects, the parts add up to all of them, and no reload is missed or repeated.
func TestShardedSmallRun(t *testing.T) {
	ctx, bin, out := smoke(t)
	f, err := Run(ctx, Config{Bin: bin, ConfigMaps: 120, Secrets: 20, Deployments: 80, Shared: 20, Namespaces: 8,
		SourceBytes: 1 << 10, Changes: 20, ChangeRate: 50, Workers: 16, Out: out, Replicas: 2, Shards: 4})
	testutil.Must(t, err)
	f.Print(testWriter{t})
	if len(f.Replicas) != 2 {
		t.Fatalf("%d replicas measured, want 2", len(f.Replicas))
	}
	shards, deployments := 0, 0
	for _, r := range f.Replicas {
		if r.Shards == 0 || r.Cached["Deployment"] == 0 || r.Cached["Deployment"] == f.Objects.Deployments || r.AfterSync.RSS == 0 {
			t.Errorf("%s: %d shards, %d of %d Deployments cached, RSS %d", r.Name, r.Shards, r.Cached["Deployment"], f.Objects.Deployments, r.AfterSync.RSS)
		}
		shards += r.Shards
		deployments += r.Cached["Deployment"]
	}
	if shards != 4 || deployments != f.Objects.Deployments {
		t.Errorf("the replicas lead %d of 4 shards and cache %d of %d Deployments", shards, deployments, f.Objects.Deployments)
	}
	if f.Reloads == 0 || f.Reloads != f.Expected || f.Missed != 0 || f.Duplicates != 0 {
		t.Errorf("%d reloads of %d expected, %d missed, %d duplicates", f.Reloads, f.Expected, f.Missed, f.Duplicates)
	}
}

// smoke builds reloader for a small run, and gives it a context of 4 minutes and the output
// for its progress (shown with -v).
func smoke(t *testing.T) (context.Context, string, io.Writer) {
	bin, err := proc.Build("../../../cmd/reloader", t.TempDir())
	testutil.Must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	var out io.Writer = io.Discard
	if testing.Verbose() {
		out = os.Stderr
	}
	return ctx, bin, out
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
