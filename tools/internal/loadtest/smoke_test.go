package loadtest

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reloader-operator/reloader/internal/testenv/proc"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// binDir holds the reloader the smoke tests build once; TestMain removes it.
var binDir string

// reloaderBinary builds cmd/reloader once for the smoke tests.
var reloaderBinary = sync.OnceValues(func() (string, error) {
	return proc.Build("../../../cmd/reloader", binDir)
})

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "loadtest-smoke-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// The tool end to end, on real control planes: a correct build passes the correctness gates
// of S4 (nothing may reload) and S6 (restart mid-load), and a build that notifies instead of
// reloading is caught missing reloads. No timing is asserted.
func TestSmokeRunAndReport(t *testing.T) {
	if testing.Short() {
		t.Skip("starts control planes")
	}
	t.Parallel() // mostly waits, as does TestSmokeFaultsAndChecks
	bin, err := reloaderBinary()
	testutil.Must(t, err)
	dir := t.TempDir()
	var progress strings.Builder
	scenarios, err := Select("S4,S6")
	testutil.Must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	results, err := Run(ctx, Config{
		Sides:     []Side{{Name: "old", Bin: bin, Args: []string{"--webhook-url=http://127.0.0.1:9/"}}, {Name: "new", Bin: bin}},
		Scenarios: scenarios, Params: Params{Scale: 0.05, Duration: 4 * time.Second},
		ResultsDir: dir, MetricsAddrFlag: "--metrics-addr", Nodes: 1, Progress: &progress, Parallelism: 2,
	})
	testutil.Must(t, err)
	t.Log(progress.String())
	if len(results) != 4 {
		t.Fatalf("%d results", len(results))
	}
	for _, r := range results {
		if r.Error != "" {
			t.Fatalf("%s %s: %s", r.Scenario, r.Side, r.Error)
		}
		// S4's load asks for nothing: its requests may all be start-up, counted apart.
		if r.API == nil || r.APIStartup == nil || r.API.Total+r.APIStartup.Total == 0 || r.PeakRSSMiB <= 0 {
			t.Errorf("%s %s measured nothing: api %+v, at start-up %+v, rss %v", r.Scenario, r.Side, r.API, r.APIStartup, r.PeakRSSMiB)
		}
		if r.Build.Version == "" || r.Build.SHA256 == "" || !strings.Contains(strings.Join(r.Build.Args, " "), "--metrics-addr=") || r.Cores == 0 {
			t.Errorf("%s %s: build not recorded: %+v, %d cores", r.Scenario, r.Side, r.Build, r.Cores)
		}
		if r.Usage.Samples == 0 || r.Runtime.Reconciles == nil || r.Runtime.Errors == nil || r.Runtime.HeapPeakMiB == nil || r.Runtime.ReconcileDurationMs == nil {
			t.Errorf("%s %s: /proc or /metrics not sampled: usage %+v, runtime %+v", r.Scenario, r.Side, r.Usage, r.Runtime)
		}
		// The counters of the process S6 stopped count too.
		if r.Side == "new" && r.Scenario == "S6" && r.Runtime.Counters["reloader_reload_executed_total"] < float64(r.Reloads) {
			t.Errorf("S6 new: %v reloads executed by the metrics of both processes, %d observed", r.Runtime.Counters["reloader_reload_executed_total"], r.Reloads)
		}
		correct := r.Missed == 0 && r.Duplicates == 0 && r.Unexpected == 0
		switch {
		case r.Side == "new" && !correct:
			t.Errorf("%s new: missed %d, duplicates %d, unexpected %d: %v", r.Scenario, r.Missed, r.Duplicates, r.Unexpected, r.Examples)
		case r.Side == "new" && r.Scenario == "S6" && r.Reloads == 0:
			t.Error("S6 new: no reloads observed")
		case r.Side == "old" && r.Scenario == "S6" && r.Missed == 0:
			t.Errorf("S6: a build that never reloads was not caught (%d reloads)", r.Reloads)
		case r.Side == "old" && r.Scenario == "S4" && !correct:
			t.Errorf("S4 old: nothing changed, yet %v", r.Examples)
		}
	}
	loaded, err := LoadResults(dir)
	if err != nil || len(loaded) != 4 {
		t.Fatalf("results read back: %d, %v", len(loaded), err)
	}
	// The old side (a build that only notifies) misses S6's reloads: shown as its failure,
	// while the report's verdict is the new build's.
	rep := Build(loaded, DefaultGates())
	for _, s := range rep.Sections {
		if s.Scenario == "S6" && (s.OldVerdict.Pass || !strings.HasPrefix(s.OldVerdict.String(), "FAIL (missed ")) {
			t.Errorf("S6: the old side's missed reloads are not its failure: %v", s.OldVerdict)
		}
		for _, row := range s.Rows {
			if row.Metric == "missed reloads" && row.NewVerdict != "pass" {
				t.Errorf("%s: new side's missed reloads judged %q", s.Scenario, row.NewVerdict)
			}
		}
	}
	testutil.Must(t, rep.WriteAll(dir))
	for _, name := range []string{"report.txt", "report.json", "report.md", "report.html", "scenarios/S6.md", "scenarios/S4.html"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() == 0 {
			t.Errorf("%s not written: %v", name, err)
		}
	}
}

// The rest of the quick set, a burst (S1) and API faults (S7), and the checks of the cluster
// after the load (S12): a correct build follows the burst, rides out 429s, 5xx, latency, a QPS
// limit and cut watches with no reload missed, and its pauses cut the rollouts. No timing is
// asserted.
func TestSmokeFaultsAndChecks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts control planes")
	}
	t.Parallel()
	bin, err := reloaderBinary()
	testutil.Must(t, err)
	scenarios, err := Select("S1,S7,S12")
	testutil.Must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var progress strings.Builder
	results, err := Run(ctx, Config{Sides: []Side{{Name: "new", Bin: bin}}, Scenarios: scenarios, Params: Params{Scale: 0.05, Duration: 6 * time.Second},
		ResultsDir: t.TempDir(), MetricsAddrFlag: "--metrics-addr", Nodes: 1, Progress: &progress, Parallelism: 2})
	testutil.Must(t, err)
	t.Log(progress.String())
	for _, r := range results {
		if r.Error != "" || r.Missed != 0 || r.Duplicates != 0 || r.Unexpected != 0 || r.Reloads == 0 {
			t.Errorf("%s: error %q, %d reloads, missed %d, duplicates %d, unexpected %d", r.Scenario, r.Error, r.Reloads, r.Missed, r.Duplicates, r.Unexpected)
		}
		switch r.Scenario {
		case "S7":
			st := r.Faults
			if st == nil || st.Proxy.TooManyRequests+st.Proxy.ServerErrors+st.Proxy.Throttled == 0 || st.Proxy.Retries == 0 || st.ClientErrors == nil || *st.ClientErrors == 0 {
				t.Errorf("S7: faults not injected or not ridden out: %+v", st)
			}
		case "S12":
			figures := map[string]float64{}
			for _, c := range r.Checks {
				figures[c.Name] = c.Value
			}
			_, gaps := figures["observer watch gaps"]
			if len(figures) != 5 || !gaps || figures["observer watch gaps"] != 0 ||
				figures["rollouts (new ReplicaSets)"] >= figures["template changes"] || figures["Deployments left paused"] != 0 {
				t.Errorf("S12 checks: %v", r.Checks)
			}
		}
	}
}

// The guardrail scenarios on real control planes, with the real Deployment controller: this
// build, run with the flap breaker off as the A/B runs have it (--flap-max-changes=0), gets
// it back on for S18 and rolls the flapping Secret's workloads a handful of times, once when
// it is quiet and once on a later change, naming both writers; in S19 the bad content reaches
// the canary alone, its rollout stalls, and every Deployment completes on the fix, rolled
// once. No timing is asserted.
func TestSmokeGuardrails(t *testing.T) {
	if testing.Short() {
		t.Skip("starts control planes")
	}
	t.Parallel()
	bin, err := reloaderBinary()
	testutil.Must(t, err)
	scenarios, err := Select("S18,S19")
	testutil.Must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var progress strings.Builder
	results, err := Run(ctx, Config{Sides: []Side{{Name: "new", Bin: bin, Args: []string{"--flap-max-changes=0"}}}, Scenarios: scenarios,
		Params: Params{Scale: 0.05, Duration: 5 * time.Second}, ResultsDir: t.TempDir(), MetricsAddrFlag: "--metrics-addr", Nodes: 1,
		Progress: &progress, Parallelism: 2})
	testutil.Must(t, err)
	t.Log(progress.String())
	if len(results) != 2 {
		t.Fatalf("%d results", len(results))
	}
	for _, r := range results {
		figures := map[string]float64{}
		for _, c := range r.Checks {
			figures[c.Name] = c.Value
		}
		t.Logf("%s: %d reloads for %d writes; %v", r.Scenario, r.Reloads, r.Writes, figures)
		if r.Error != "" || r.Missed != 0 || r.Duplicates != 0 || r.Unexpected != 0 {
			t.Errorf("%s: error %q, missed %d, duplicates %d, unexpected %d: %v", r.Scenario, r.Error, r.Missed, r.Duplicates, r.Unexpected, r.Examples)
		}
		switch r.Scenario {
		case "S18":
			if args := r.Build.Args; !slices.Contains(args, "--flap-max-changes=8") || slices.Index(args, "--flap-max-changes=8") < slices.Index(args, "--flap-max-changes=0") {
				t.Errorf("S18 args %v: the scenario's flap breaker must come after the side's", args)
			}
			if figures["rollouts per workload while two writers flapped its Secret (most)"] > flapHandful ||
				figures["rollouts per workload once the Secret was quiet (most)"] > 1 || figures["rollouts per workload on one later change (most)"] != 1 {
				t.Errorf("S18 rollouts: want at most %d during the flap, at most 1 once quiet (none when the workloads are on the last content already), 1 on the later change", flapHandful)
			}
			if figures["SourceQuarantined Events naming both writers"] < 1 || figures["reloader_quarantined_sources, highest"] != 1 {
				t.Error("S18: the quarantine was not reported (an Event naming both writers, the gauge at 1)")
			}
		case "S19":
			n := float64(r.Workloads)
			if s := figures["failure spread: Deployments rolled onto the bad content"]; s != spreadCanary {
				t.Errorf("S19: failure spread %v of %v, want the canary alone (%d)", s, n, spreadCanary)
			}
			if most := figures["rollouts per Deployment onto the fixed content (most)"]; most != 1 {
				t.Errorf("S19: %v rollouts of a Deployment onto the fixed content, want 1", most)
			}
			if figures["Deployments stalled on the bad content (ProgressDeadlineExceeded)"] < 1 ||
				figures["Deployments not complete on the fixed content"] != 0 || figures["rollouts per Deployment onto the fixed content (fewest)"] < 1 {
				t.Error("S19: the bad content's rollouts did not stall, or the fix did not roll and complete everywhere")
			}
		}
	}
}
