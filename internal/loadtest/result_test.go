package loadtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reloader-operator/reloader/internal/audit"
)

func TestJudge(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	at := func(ms ...int) []time.Time {
		var out []time.Time
		for _, m := range ms {
			out = append(out, t0.Add(time.Duration(m)*time.Millisecond))
		}
		return out
	}
	writes := map[string][]time.Time{
		"coalesced": at(0, 100, 200), // three writes, one reload after the last: fine
		"missed":    at(0, 1000),     // reloaded only after the first write
		"duplicate": at(0),           // one write, two reloads
		"never":     at(0),           // no reload at all
	}
	changes := map[string][]time.Time{
		"coalesced": at(500),
		"missed":    at(300),
		"duplicate": at(400, 900),
		"quiet":     at(50), // no write concerned it
	}
	tracked := map[string]bool{"coalesced": true, "missed": true, "duplicate": true, "never": true, "quiet": true}
	var r Result
	judge(&r, writes, tracked, changes)
	if r.Missed != 2 || r.Duplicates != 1 || r.Unexpected != 1 {
		t.Errorf("missed %d, duplicates %d, unexpected %d; want 2, 1, 1 (%v)", r.Missed, r.Duplicates, r.Unexpected, r.Examples)
	}
	if r.ExpectedMin != 4 || r.ExpectedMax != 7 || r.Reloads != 4 || r.Workloads != 5 {
		t.Errorf("expected %d..%d, reloads %d, workloads %d", r.ExpectedMin, r.ExpectedMax, r.Reloads, r.Workloads)
	}
	// Latencies: coalesced 500, 400, 300; missed 300 (the second write has none); duplicate 400.
	if r.Latency.P50 != 400 || r.Latency.Max != 500 || len(r.Latency.Samples) != 5 {
		t.Errorf("latency %+v", r.Latency)
	}
	if settled(writes, changes) {
		t.Error("settled although writes are not followed")
	}
	if !settled(map[string][]time.Time{"coalesced": writes["coalesced"]}, changes) {
		t.Error("not settled although the last write was followed")
	}
}

func TestGates(t *testing.T) {
	old := Result{Scenario: "S1", Side: "old", Latency: Latency{P50: 100, P95: 200}, API: &API{Total: 100, Writes: 50}, PeakRSSMiB: 40}
	good := old
	good.Side = "new"
	if rep := Build([]Result{old, good}, DefaultGates()); !rep.Pass {
		t.Errorf("identical sides fail: %+v", rep.Sections[0].Rows)
	}
	cases := map[string]func(*Result){
		"missed reloads":                   func(r *Result) { r.Missed = 1 },
		"duplicate reloads":                func(r *Result) { r.Duplicates = 2 },
		"latency p95 (ms)":                 func(r *Result) { r.Latency.P95 = 2000 },
		"API requests":                     func(r *Result) { r.API = &API{Total: 1000, Writes: 50} },
		"peak RSS (MiB)":                   func(r *Result) { r.PeakRSSMiB = 400 },
		"idle req/s after load (hot loop)": func(r *Result) { r.IdleRPSAfter = 30 },
	}
	for metric, worsen := range cases {
		bad := good
		worsen(&bad)
		rep := Build([]Result{old, bad}, DefaultGates())
		if rep.Pass {
			t.Errorf("%s: regression passed", metric)
		}
		for _, row := range rep.Sections[0].Rows {
			if row.Verdict == "FAIL" && row.Metric != metric {
				t.Errorf("%s: %s failed too", metric, row.Metric)
			}
		}
	}
	failed := good
	failed.Error = "controller not ready"
	if Build([]Result{old, failed}, DefaultGates()).Pass {
		t.Error("a failed run passed")
	}
}

func TestAuditCounting(t *testing.T) {
	log := strings.Join([]string{
		`{"verb":"patch","user":{"username":"loadtest-new"},"objectRef":{"resource":"deployments"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-11-21T10:00:01.000000Z"}`,
		`{"verb":"patch","user":{"username":"loadtest-new"},"objectRef":{"resource":"deployments"},"responseStatus":{"code":409},"requestReceivedTimestamp":"2026-11-21T10:00:02.000000Z"}`,
		`{"verb":"list","user":{"username":"loadtest-new"},"objectRef":{"resource":"configmaps"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-11-21T10:00:03.000000Z"}`,
		`{"verb":"watch","user":{"username":"loadtest-new"},"objectRef":{"resource":"configmaps"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-11-21T10:00:03.500000Z"}`,
		`{"verb":"get","user":{"username":"admin"},"objectRef":{"resource":"pods"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-11-21T10:00:03.000000Z"}`,
	}, "\n")
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	ev, err := audit.Read(path, "loadtest-new")
	if err != nil {
		t.Fatal(err)
	}
	api := countAPI(ev)
	if api.Total != 4 || api.Conflicts != 1 || api.Lists != 1 || api.Writes != 2 || api.ByVerb["watch"] != 1 {
		t.Errorf("counted %+v", api)
	}
	from := time.Date(2026, 11, 21, 10, 0, 2, 0, time.UTC)
	if got := rate(ev, from, from.Add(2*time.Second)); got != 1 { // the 409 patch and the list; the watch does not count
		t.Errorf("rate %v, want 1/s", got)
	}
	if !strings.Contains(auditPolicy("loadtest-old", "loadtest-new"), `users: ["loadtest-old","loadtest-new"]`) {
		t.Error(auditPolicy("loadtest-old", "loadtest-new"))
	}
}

func TestMetricValueAndProcessStats(t *testing.T) {
	exposition := "# HELP x\nreloader_reload_executed_total{success=\"false\"} 1\nreloader_reload_executed_total{success=\"true\"} 41\nreloader_reload_executed_total_by_namespace{namespace=\"a\"} 5\n"
	if v, ok := metricValue(exposition, "reloader_reload_executed_total"); !ok || v != 42 {
		t.Errorf("metric %v %v, want 42", v, ok)
	}
	if _, ok := metricValue(exposition, "reloader_missing"); ok {
		t.Error("found a missing metric")
	}
	cpu, rss, err := processStats(os.Getpid())
	if err != nil || rss < 1<<20 || cpu < 0 {
		t.Errorf("own process: cpu %v, rss %d, %v", cpu, rss, err)
	}
}

func TestEveryScenarioBuilds(t *testing.T) {
	for _, id := range ScenarioIDs() {
		s := Scenarios[id].Build(Params{Scale: 1, Duration: time.Second})
		if len(s.Workloads) == 0 || len(s.Sources) == 0 || len(s.Namespaces) == 0 {
			t.Errorf("%s builds nothing: %d workloads, %d sources", id, len(s.Workloads), len(s.Sources))
		}
		known := map[string]bool{}
		for _, src := range s.Sources {
			known[src.Key()] = true
		}
		for _, c := range s.Configs {
			if !known[c.Source.Key()] {
				t.Errorf("%s: ReloaderConfig %s names %s, which the scenario does not create", id, c.Name, c.Source.Key())
			}
		}
		for _, w := range s.Workloads {
			for _, r := range w.Refs {
				if !known[r.Source.Key()] {
					t.Errorf("%s: %s uses %s, which the scenario does not create", id, w.Key(), r.Source.Key())
				}
			}
		}
	}
	if got := len(ScenarioIDs()); got != 17 {
		t.Errorf("%d scenarios", got)
	}
	if _, err := Select("S1,s4,S6"); err != nil {
		t.Error(err)
	}
	if _, err := Select("S99"); err == nil {
		t.Error("unknown scenario accepted")
	}
}
