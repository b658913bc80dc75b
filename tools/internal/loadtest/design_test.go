package loadtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reloader-operator/reloader/internal/testutil"
)

// At scale 1 the scenarios have the design's sizes and points; a smaller scale shrinks them.
func TestDesignSizes(t *testing.T) {
	build := func(id string, scale float64) Spec { return Scenarios[id].Build(Params{Scale: scale}) }
	users := func(s Spec) map[string]int {
		out := map[string]int{}
		for _, w := range s.Workloads {
			for _, r := range w.Refs {
				out[r.Source.Key()]++
			}
		}
		return out
	}
	kinds := func(s Spec) map[string]int {
		out := map[string]int{}
		for _, src := range s.Sources {
			out[src.Kind]++
		}
		return out
	}

	s1 := build("S1", 1)
	if u := users(s1); len(s1.Workloads) != 500 || len(u) != 2 || kinds(s1)[Secret] != 1 || u["ConfigMap/s1/burst-config"] != 500 {
		t.Errorf("S1: %d workloads, users %v", len(s1.Workloads), u)
	}
	s2 := build("S2", 1)
	if k := kinds(s2); k[ConfigMap] != 200 || k[Secret] != 200 {
		t.Errorf("S2 sources %v", k)
	}
	for src, n := range users(s2) {
		if n < 5 || n > 20 {
			t.Errorf("S2: %s has %d users, want 5 to 20", src, n)
		}
	}
	if s3 := build("S3", 1); len(s3.Namespaces) != 200 || len(s3.Workloads) != 4000 {
		t.Errorf("S3: %d namespaces, %d workloads", len(s3.Namespaces), len(s3.Workloads))
	}
	if s5 := build("S5", 1); !strings.Contains(strings.Join(s5.Args, " "), "--reload-on-delete=true") {
		t.Errorf("S5 args %v: deleting sources needs --reload-on-delete", s5.Args)
	}
	s7 := build("S7", 1)
	if f := s7.Faults; f == nil || f.TooManyRequests == 0 || f.ServerErrors == 0 || f.Latency == 0 || f.QPS == 0 || f.DropWatchAfter == 0 {
		t.Errorf("S7 faults %+v", s7.Faults)
	}
	for _, src := range build("S8", 1).Sources {
		// Near the 1 MiB limit of a ConfigMap's or Secret's data, and under it.
		total := 0
		for k, v := range data(src.Size, 1) {
			total += len(k) + len(v)
		}
		if total < 900<<10 || total >= 1<<20 {
			t.Errorf("S8: %s holds %d bytes", src.Key(), total)
		}
	}
	if c := build("S11", 1).Checks; len(c) != 1 || c[0] != CheckLastReloadedFrom {
		t.Errorf("S11 checks %v", c)
	}
	if c := build("S12", 1).Checks; len(c) != 1 || c[0] != CheckPauseCut {
		t.Errorf("S12 checks %v", c)
	}
	// --scale shrinks every count, to at least one of each thing.
	for _, id := range ScenarioIDs() {
		full, small := build(id, 1), build(id, 0.01)
		if len(small.Workloads) == 0 || len(small.Workloads) > len(full.Workloads) || len(small.Sources) == 0 {
			t.Errorf("%s at scale 0.01: %d workloads, %d sources (full: %d)", id, len(small.Workloads), len(small.Sources), len(full.Workloads))
		}
	}
	if n := len(build("S3", 0.1).Workloads); n != 400 {
		t.Errorf("S3 at scale 0.1: %d workloads", n)
	}
	p := Params{Scale: 0.1}
	if p.D(5*time.Minute) != 30*time.Second || p.D(10*time.Second) != 5*time.Second || (Params{Scale: 1}).D(time.Minute) != time.Minute ||
		(Params{Scale: 1, Duration: 7 * time.Second}).D(time.Minute) != 7*time.Second {
		t.Error("durations do not follow the scale and --duration")
	}
}

func TestExpositionAndHistograms(t *testing.T) {
	text := `# HELP x
reloader_errors_total{kind="a"} 2
reloader_errors_total{kind="b",note="a \"quoted\" } value"} 3
reloader_reconcile_duration_seconds_bucket{le="0.1"} 50
reloader_reconcile_duration_seconds_bucket{le="0.2"} 90
reloader_reconcile_duration_seconds_bucket{le="+Inf"} 100
reloader_reconcile_duration_seconds_sum 9
reloader_reconcile_duration_seconds_count 100
go_gc_duration_seconds{quantile="0.5"} 0.0001
go_gc_duration_seconds{quantile="1"} 0.004
rest_client_requests_total{code="200",host="x",method="GET"} 7
rest_client_requests_total{code="409",host="x",method="PATCH"} 1
go_goroutines 42
reloader_workload_reconcile_total{kind="Deployment",outcome="reloaded"} 4
reloader_workload_reconcile_total{kind="StatefulSet",outcome="reloaded"} 1
reloader_workload_reconcile_total{kind="Deployment",outcome="waiting"} 6
`
	s := newScrape(text)
	if s.Sums[outcomeMetric] != 11 || s.Sums[outcomeSeries("reloaded")] != 5 || s.Sums[outcomeSeries("waiting")] != 6 {
		t.Errorf("reconciles by outcome: %v", s.Sums)
	}
	if s.Sums["reloader_errors_total"] != 5 || s.Sums["go_goroutines"] != 42 || s.Sums[`go_gc_duration_seconds{quantile="1"}`] != 0.004 {
		t.Errorf("sums %v", s.Sums)
	}
	if s.Client["GET 200"] != 7 || s.Client["PATCH 409"] != 1 {
		t.Errorf("client %v", s.Client)
	}
	b := s.Buckets["reloader_reconcile_duration_seconds"]
	for _, c := range []struct{ q, want float64 }{{0.5, 0.1}, {0.7, 0.15}, {0.95, 0.2}} {
		if got, ok := quantile(b, c.q); !ok || got < c.want-1e-9 || got > c.want+1e-9 {
			t.Errorf("q%.2f = %v, want %v", c.q, got, c.want)
		}
	}
	// Two processes (a restart): counters and buckets add up.
	both := s.add(s)
	if both.Sums["reloader_errors_total"] != 10 || both.Buckets["reloader_reconcile_duration_seconds"][0.1] != 100 {
		t.Errorf("added %v", both.Sums)
	}
	api := clientAPI(both.Client)
	if api.Total != 16 || api.Writes != 2 || api.Conflicts != 2 || api.ByVerb["GET"] != 14 || api.Source != "client metrics" {
		t.Errorf("client API %+v", api)
	}
}

func TestUsageAndReconcileReturn(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	var samples []Sample
	for i := range 40 {
		// CPU grows 0.5 s a second for the first 20 s, then 0.1; reconciles 10/s for 20 s, then none.
		cpu, rec := 0.5*float64(min(i, 20))+0.1*float64(max(i-20, 0)), 10*float64(min(i, 20))
		sc := Scrape{Sums: map[string]float64{"reloader_reconcile_total": rec, "go_goroutines": float64(100 + i), outcomeSeries("waiting"): rec / 2}}
		samples = append(samples, Sample{At: t0.Add(time.Duration(i) * time.Second), CPU: cpu, RSS: int64(i) << 20, Metrics: &sc})
	}
	u := usage(samples, 6, 50<<20, window{t0, t0.Add(40 * time.Second)}, window{t0.Add(10 * time.Second), t0.Add(20 * time.Second)}, t0.Add(4500*time.Millisecond))
	if u.CPUSteadyCores != 0.5 || u.CPUPeakCores != 0.5 || u.CPUAvgCores != 6.0/40 || u.RSSPeakMiB != 50 || u.RSSSteadyMiB != 15 {
		t.Errorf("usage %+v", u)
	}
	// The load began at 4.5 s: the sample at 4 s holds the start-up's CPU.
	if u.CPUStartupSeconds == nil || *u.CPUStartupSeconds != 2 {
		t.Errorf("CPU at start-up %v, want 2 s", u.CPUStartupSeconds)
	}
	// ... and the RSS after sync: 4 MiB.
	if u.RSSStartupMiB == nil || *u.RSSStartupMiB != 4 {
		t.Errorf("RSS after sync %v, want 4 MiB", u.RSSStartupMiB)
	}
	if u := usage(samples, 6, 50<<20, window{t0, t0.Add(40 * time.Second)}, window{}, t0.Add(-time.Second)); u.CPUStartupSeconds != nil || u.RSSStartupMiB != nil {
		t.Errorf("CPU %v, RSS %v at start-up with no sample before the load, want none", u.CPUStartupSeconds, u.RSSStartupMiB)
	}
	rt := runtimeFigures(samples, *samples[len(samples)-1].Metrics, window{t0, t0.Add(20 * time.Second)}, window{t0.Add(10 * time.Second), t0.Add(20 * time.Second)})
	if got := rt.Counters[outcomeSeries("waiting")]; got != 100 {
		t.Errorf("reconciles waiting: %v, want 100 (the last sample's count)", got)
	}
	if rt.Reconciles == nil || *rt.Reconciles != 200 || *rt.ReconcilesPerSecond != 10 || *rt.GoroutinesPeak != 139 || rt.Errors != nil {
		t.Errorf("runtime %+v", rt)
	}
	// Back at the rate before the load (0/s) from 20 s on; settled at 15 s: 5 s.
	if back := returnedAt(samples, t0.Add(15*time.Second), 0, 6*time.Second); back == nil || *back != 5 {
		t.Errorf("returned after %v, want 5 s", back)
	}
	// Never back when the rate stays high to the end.
	if back := returnedAt(samples[:21], t0, 0, 6*time.Second); back != nil {
		t.Errorf("returned after %v while reconciling 10/s", *back)
	}
}

// The new gates: errors, CPU, LISTs and p99 judge both ways, WARN comes before FAIL, and the
// reconcile rate must return in time.
func TestWarnAndNewGates(t *testing.T) {
	errs := func(v float64) *float64 { return &v }
	old := Result{Scenario: "S1", Side: "old", LatencyFromLastWrite: Latency{P50: 100, P95: 200, P99: 300}, API: &API{Total: 100, Writes: 50, Lists: 10},
		PeakRSSMiB: 40, CPUSeconds: 10, Runtime: Runtime{Errors: errs(0), ReconcileReturnSeconds: errs(2)}}
	nu := old
	nu.Side = "new"
	cases := []struct {
		name  string
		worse func(*Result)
		want  string
	}{
		{"errors", func(r *Result) { r.Runtime.Errors = errs(1) }, "FAIL (errors 1)"},
		{"CPU fail", func(r *Result) { r.CPUSeconds = 18 }, "FAIL (CPU seconds 18 s)"},
		{"CPU warn", func(r *Result) { r.CPUSeconds = 14 }, "WARN (CPU seconds 14 s)"},
		{"LISTs", func(r *Result) { r.API = &API{Total: 100, Writes: 50, Lists: 30} }, "FAIL (LISTs 30)"},
		{"p99", func(r *Result) { r.LatencyFromLastWrite.P99 = 2000 }, "FAIL (p99 from last write 2000 ms)"},
		{"p99 warn", func(r *Result) { r.LatencyFromLastWrite.P99 = 1200 }, "WARN (p99 from last write 1200 ms)"},
		{"reconcile rate not back", func(r *Result) { r.Runtime.ReconcileReturnSeconds, r.Runtime.ReconcileNotBack = nil, true }, "FAIL (reconcile rate back after 60 s)"},
		{"reconcile rate back late", func(r *Result) { r.Runtime.ReconcileReturnSeconds = errs(40) }, "WARN (reconcile rate back after 40 s)"},
	}
	for _, c := range cases {
		bad := nu
		c.worse(&bad)
		rep := Build([]Result{old, bad}, DefaultGates())
		got := rep.Sections[0].NewVerdict
		if got.String() != c.want || rep.Pass != strings.HasPrefix(c.want, "WARN") || rep.Sections[0].OldVerdict.Level() != "PASS" {
			t.Errorf("%s: new %q (report pass %v), old %q; want new %q", c.name, got, rep.Pass, rep.Sections[0].OldVerdict, c.want)
		}
	}
	// Under injected faults errors are chance: shown, not judged.
	faulty := nu
	faulty.Runtime.Errors, faulty.Faults = errs(9), &FaultResult{}
	if rep := Build([]Result{old, faulty}, DefaultGates()); !rep.Pass || rep.Sections[0].NewVerdict.Level() != "PASS" {
		t.Errorf("errors under injected faults judged: %v", rep.Sections[0].NewVerdict)
	}
	// A figure only one side exposes is shown, not judged.
	upstreamLike := old
	upstreamLike.Runtime.Errors = nil
	bad := nu
	bad.Runtime.Errors = errs(5)
	if rep := Build([]Result{upstreamLike, bad}, DefaultGates()); !rep.Pass || rep.Sections[0].NewVerdict.Level() != "PASS" {
		t.Errorf("errors judged against a side without the metric: %v", rep.Sections[0].NewVerdict)
	}
	// Against a side that missed reloads the gates stay on (judgedAgainstAMiss has the rest):
	// a side that rolled nothing has no latency, so the other is held to the absolute bound,
	// and a side that missed fails on its misses.
	idle := old
	idle.Missed, idle.LatencyFromLastWrite, idle.API, idle.CPUSeconds = 100, Latency{}, &API{Total: 2}, 0.1
	idle.ExpectedMin = 100
	slow := nu
	slow.LatencyFromLastWrite.P50, slow.Reloads, slow.ExpectedMin = 5000, 100, 100
	if rep := Build([]Result{idle, slow}, DefaultGates()); rep.Pass || rep.Sections[0].NewVerdict.String() != "FAIL (p50 from last write 5000 ms)" ||
		rep.Sections[0].OldVerdict.String() != "FAIL (missed 100)" {
		t.Errorf("against a side that missed reloads: new %v, old %v; want new FAIL (p50 from last write 5000 ms), old FAIL (missed 100)", rep.Sections[0].NewVerdict, rep.Sections[0].OldVerdict)
	}
	lazy := nu
	lazy.Missed = 3
	fast := old
	fast.LatencyFromLastWrite.P50 = 5000
	if rep := Build([]Result{fast, lazy}, DefaultGates()); rep.Pass || rep.Sections[0].OldVerdict.String() != "FAIL (p50 from last write 5000 ms)" {
		t.Errorf("the old side judged against a new side that missed: old %v, new %v", rep.Sections[0].OldVerdict, rep.Sections[0].NewVerdict)
	}
}

// Each scenario gets its own reports, and `report --scenario --output` their subset.
func TestPerScenarioReports(t *testing.T) {
	mk := func(id, side string) Result {
		return Result{Scenario: id, Side: side, Binary: "/bin/" + side, Build: BuildInfo{Version: side + " 1.0", Args: []string{"--x=1"}}, Cores: 2, Scale: 0.5}
	}
	rep := Build([]Result{mk("S1", "old"), mk("S1", "new"), mk("S4", "old"), mk("S4", "new")}, DefaultGates())
	dir := t.TempDir()
	testutil.Must(t, rep.WriteAll(dir))
	for _, id := range []string{"S1", "S4"} {
		for _, f := range Formats {
			b, err := os.ReadFile(filepath.Join(dir, "scenarios", id+"."+f))
			testutil.Must(t, err)
			other := map[string]string{"S1": "S4", "S4": "S1"}[id]
			if !strings.Contains(string(b), id) || strings.Contains(string(b), other+" ") || strings.Contains(string(b), "\""+other+"\"") {
				t.Errorf("scenarios/%s.%s holds the wrong scenarios", id, f)
			}
		}
	}
	txt, _ := os.ReadFile(filepath.Join(dir, "report.txt"))
	if !strings.Contains(string(txt), `new: /bin/new (version "new 1.0", sha256 ) args: --x=1; 2 cores, scale 0.5, duration design`) {
		t.Errorf("builds not stated:\n%s", txt)
	}
	if _, err := rep.Only([]string{"S9"}); err == nil {
		t.Error("a scenario without results accepted")
	}
	if err := rep.WriteFile(filepath.Join(dir, "x.pdf")); err == nil {
		t.Error("unknown format accepted")
	}
}
