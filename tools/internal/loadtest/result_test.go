package loadtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reloader-operator/reloader/internal/testenv/audit"
	"github.com/reloader-operator/reloader/internal/testutil"
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
	judge(&r, writes, tracked, changes, nil)
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
	// From the last write covered, one sample per rollout that covered a write: coalesced
	// 500-200; missed 300-0; duplicate 400-0 (its second rollout covers no write).
	if got := r.LatencyFromLastWrite.Samples; len(got) != 3 || got[0] != 300 || got[1] != 300 || got[2] != 400 {
		t.Errorf("latency from last write %+v", r.LatencyFromLastWrite)
	}
	if settled(writes, changes) {
		t.Error("settled although writes are not followed")
	}
	if !settled(map[string][]time.Time{"coalesced": writes["coalesced"]}, changes) {
		t.Error("not settled although the last write was followed")
	}
}

// A build that rolls once per write and one that coalesces a burst of ten writes 100 ms
// apart into one rollout, each rolling 50 ms after the write it follows: from each write the
// coalescing build looks nine times slower; from the last write covered the two read alike.
func TestLatencyFromLastWriteJudgesCoalescingAlike(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	var burst, perWrite []time.Time
	for i := range 10 {
		w := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		burst = append(burst, w)
		perWrite = append(perWrite, w.Add(50*time.Millisecond))
	}
	coalesced := []time.Time{burst[9].Add(50 * time.Millisecond)}
	tracked := map[string]bool{"w": true}
	var each, one Result
	judge(&each, map[string][]time.Time{"w": burst}, tracked, map[string][]time.Time{"w": perWrite}, nil)
	judge(&one, map[string][]time.Time{"w": burst}, tracked, map[string][]time.Time{"w": coalesced}, nil)
	if each.Reloads != 10 || one.Reloads != 1 || each.Duplicates+one.Duplicates+each.Missed+one.Missed != 0 {
		t.Fatalf("reloads %d and %d; %+v %+v", each.Reloads, one.Reloads, each, one)
	}
	if each.Latency.P50 != 50 || one.Latency.P50 != 450 {
		t.Errorf("p50 from each write: per-write %v, coalesced %v; want 50, 450", each.Latency.P50, one.Latency.P50)
	}
	if each.LatencyFromLastWrite.P50 != 50 || one.LatencyFromLastWrite.P50 != 50 || len(each.LatencyFromLastWrite.Samples) != 10 {
		t.Errorf("p50 from last write: per-write %+v, coalesced %+v; want 50 both", each.LatencyFromLastWrite, one.LatencyFromLastWrite)
	}
	// Gated on the last write covered, the coalescing build passes against the per-write one,
	// which it would not from each write (450 > 50×1.5+100).
	g := DefaultGates()
	g.LatencySlackMs = 100
	each.Scenario, each.Side, one.Scenario, one.Side = "S1", "old", "S1", "new"
	if rep := Build([]Result{each, one}, g); !rep.Pass {
		t.Errorf("coalescing build fails: %v", rep.Sections[0].NewVerdict)
	}
}

func TestGates(t *testing.T) {
	old := Result{Scenario: "S1", Side: "old", LatencyFromLastWrite: Latency{P50: 100, P95: 200}, API: &API{Total: 100, Writes: 50}, PeakRSSMiB: 40}
	good := old
	good.Side = "new"
	if rep := Build([]Result{old, good}, DefaultGates()); !rep.Pass || rep.Judged != "new" {
		t.Errorf("identical sides fail: %+v", rep.Sections[0].Rows)
	}
	cases := map[string]func(*Result){
		"missed reloads":                           func(r *Result) { r.Missed = 1 },
		"duplicate reloads":                        func(r *Result) { r.Duplicates = 2 },
		"unexpected reloads":                       func(r *Result) { r.Unexpected = 1 },
		"latency p50 from last write covered (ms)": func(r *Result) { r.LatencyFromLastWrite.P50 = 1000 },
		"latency p95 from last write covered (ms)": func(r *Result) { r.LatencyFromLastWrite.P95 = 2000 },
		"API requests":                             func(r *Result) { r.API = &API{Total: 1000, Writes: 50} },
		"API writes":                               func(r *Result) { r.API = &API{Total: 100, Writes: 500} },
		"peak RSS (MiB)":                           func(r *Result) { r.PeakRSSMiB = 400 },
		"repeated req/s after load (hot loop)":     func(r *Result) { r.IdleRPSAfter, r.RepeatRPSAfter = 30, 30 },
	}
	for metric, worsen := range cases {
		// Worse on the new side: the new build fails that gate alone, and the report fails.
		bad := good
		worsen(&bad)
		rep := Build([]Result{old, bad}, DefaultGates())
		if rep.Pass || rep.Sections[0].NewVerdict.Pass || !rep.Sections[0].OldVerdict.Pass {
			t.Errorf("%s worse on new: pass %v, new %v, old %v", metric, rep.Pass, rep.Sections[0].NewVerdict, rep.Sections[0].OldVerdict)
		}
		for _, row := range rep.Sections[0].Rows {
			if (row.NewVerdict == "FAIL") != (row.Metric == metric) || row.OldVerdict == "FAIL" {
				t.Errorf("%s worse on new: row %s judged old %q, new %q", metric, row.Metric, row.OldVerdict, row.NewVerdict)
			}
		}
		// Worse on the old side: the same gate fails for old only, and the report passes.
		badOld := bad
		badOld.Side = "old"
		rep = Build([]Result{badOld, good}, DefaultGates())
		if !rep.Pass || !rep.Sections[0].NewVerdict.Pass || rep.Sections[0].OldVerdict.Pass {
			t.Errorf("%s worse on old: pass %v, new %v, old %v", metric, rep.Pass, rep.Sections[0].NewVerdict, rep.Sections[0].OldVerdict)
		}
		for _, row := range rep.Sections[0].Rows {
			if (row.OldVerdict == "FAIL") != (row.Metric == metric) || row.NewVerdict == "FAIL" {
				t.Errorf("%s worse on old: row %s judged old %q, new %q", metric, row.Metric, row.OldVerdict, row.NewVerdict)
			}
		}
	}
	failed := good
	failed.Error = "controller not ready"
	if rep := Build([]Result{old, failed}, DefaultGates()); rep.Pass || rep.Sections[0].NewVerdict.String() != "FAIL (run failed)" {
		t.Errorf("a failed run passed: %v", rep.Sections[0].NewVerdict)
	}
}

// The verdict per side: the report's verdict (and so the exit code) is the new build's; the
// old build's failures are shown with what failed.
func TestVerdictPerSide(t *testing.T) {
	base := Result{Scenario: "S6", LatencyFromLastWrite: Latency{P50: 100, P95: 200}, API: &API{Total: 100, Writes: 50}, PeakRSSMiB: 40}
	side := func(name string, missed, dup int) Result {
		r := base
		r.Side, r.Missed, r.Duplicates = name, missed, dup
		return r
	}
	for _, c := range []struct {
		name      string
		old, nu   Result
		pass      bool
		oldV, nuV string
	}{
		{"old fails, new passes", side("old", 3, 0), side("new", 0, 0), true, "FAIL (missed 3)", "PASS"},
		{"both fail", side("old", 3, 1), side("new", 0, 2), false, "FAIL (missed 3, duplicates 1)", "FAIL (duplicates 2)"},
		{"new fails", side("old", 0, 0), side("new", 1, 0), false, "PASS", "FAIL (missed 1)"},
	} {
		rep := Build([]Result{c.old, c.nu}, DefaultGates())
		s := rep.Sections[0]
		if rep.Pass != c.pass || s.Pass != c.pass || s.OldVerdict.String() != c.oldV || s.NewVerdict.String() != c.nuV {
			t.Errorf("%s: report %v, section %v, old %q, new %q; want %v, %q, %q", c.name, rep.Pass, s.Pass, s.OldVerdict, s.NewVerdict, c.pass, c.oldV, c.nuV)
		}
		var text strings.Builder
		rep.Text(&text)
		for _, want := range []string{"new: " + c.nuV + "   old: " + c.oldV, "OVERALL: " + verdict(c.pass) + " (new build)"} {
			if !strings.Contains(text.String(), want) {
				t.Errorf("%s: text lacks %q:\n%s", c.name, want, text.String())
			}
		}
		if c.old.Missed > 0 && !strings.Contains(text.String(), "old build: FAIL in S6 "+strings.TrimPrefix(c.oldV, "FAIL ")) {
			t.Errorf("%s: the old build's failure is not in the last line:\n%s", c.name, text.String())
		}
	}
	// With only an old build, it is the one judged.
	rep := Build([]Result{side("old", 3, 0)}, DefaultGates())
	if rep.Judged != "old" || rep.Pass || rep.Sections[0].NewVerdict.String() != "-" {
		t.Errorf("old alone: judged %s, pass %v, new %v", rep.Judged, rep.Pass, rep.Sections[0].NewVerdict)
	}
}

// The summary: one row per scenario, verdicts per side, new/old ratios.
func TestSummary(t *testing.T) {
	old := Result{Scenario: "S1", Side: "old", Reloads: 300, Latency: Latency{P50: 250}, LatencyFromLastWrite: Latency{P50: 250, P95: 400},
		API: &API{Total: 400, Writes: 300}, PeakRSSMiB: 40}
	nu := old
	nu.Side, nu.Reloads, nu.Latency.P50, nu.API, nu.PeakRSSMiB = "new", 30, 1000, &API{Total: 80, Writes: 60}, 50
	rep := Build([]Result{old, nu, {Scenario: "S4", Side: "new", Reloads: 0, API: &API{Total: 12}, PeakRSSMiB: 30}}, DefaultGates())
	sum := rep.Summary()
	if len(sum) != 2 {
		t.Fatalf("%d summary rows", len(sum))
	}
	var got []string
	for _, p := range sum[0].Figures() {
		got = append(got, p.Ratio())
	}
	if want := "0.10× 0.20× 0.20× 4.00× 1.00× 1.25× 1.00×"; strings.Join(got, " ") != want {
		t.Errorf("S1 ratios %q, want %q", strings.Join(got, " "), want)
	}
	if sum[1].Old.String() != "-" || sum[1].APIRequests.Ratio() != "12" {
		t.Errorf("S4 (new only): old %v, API requests %s", sum[1].Old, sum[1].APIRequests.Ratio())
	}
	var text strings.Builder
	rep.Text(&text)
	lines := strings.Split(text.String(), "\n")
	if !strings.HasPrefix(lines[0], "SUMMARY: PASS") || !strings.HasPrefix(lines[1], "scenario") || !strings.HasPrefix(lines[2], "S1") || !strings.HasPrefix(lines[3], "S4") {
		t.Errorf("summary is not the report's first screen:\n%s", text.String())
	}
	var md strings.Builder
	rep.Markdown(&md)
	if !strings.Contains(md.String(), "| S1 | PASS | **FAIL (API requests 400, API writes 300)** | 0.10× | 0.20× | 0.20× | 4.00× | 1.00× | 1.25× | 1.00× |") || !strings.Contains(md.String(), "| S4 | PASS | - | 0 | 12 |") {
		t.Errorf("Markdown summary:\n%s", md.String())
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
	testutil.Must(t, os.WriteFile(path, []byte(log), 0o644))
	ev, err := audit.Read(path, "loadtest-new")
	testutil.Must(t, err)
	api := CountAPI(ev)
	if api.Total != 4 || api.Conflicts != 1 || api.Lists != 1 || api.Writes != 2 || api.ByVerb["watch"] != 1 {
		t.Errorf("counted %+v", api)
	}
	from := time.Date(2026, 11, 21, 10, 0, 2, 0, time.UTC)
	if got := rate(ev, from, from.Add(2*time.Second)); got != 1 { // the 409 patch and the list; the watch does not count
		t.Errorf("rate %v, want 1/s", got)
	}
	if got := repeatRate(ev, from, from.Add(2*time.Second)); got != 0 {
		t.Errorf("repeat rate %v with no request repeated, want 0", got)
	}
	if !strings.Contains(AuditPolicy("loadtest-old", "loadtest-new"), `users: ["loadtest-old","loadtest-new"]`) {
		t.Error(AuditPolicy("loadtest-old", "loadtest-new"))
	}
}

// A hot loop asks for the same object again and again; one Event per completed rollout, late
// but once each, is no hot loop.
func TestRepeatRate(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	ev := func(ms int, verb, resource, name string) audit.Event {
		var e audit.Event
		e.Verb, e.ObjectRef.Resource, e.ObjectRef.Namespace, e.ObjectRef.Name = verb, resource, "s15", name
		e.Received = t0.Add(time.Duration(ms) * time.Millisecond)
		return e
	}
	var oneOff, loop []audit.Event
	for i := range 5 {
		oneOff = append(oneOff, ev(100*i, "create", "events", fmt.Sprintf("bulk-%d.18ea53afb0c3632f", i)))
		loop = append(loop, ev(1000*i, "patch", "deployments", "bulk-0"), ev(1000*i+10, "get", "configmaps", "bulk-cm-0"))
	}
	loop = append(loop, ev(200, "watch", "deployments", ""), ev(300, "watch", "deployments", ""), ev(6000, "patch", "deployments", "bulk-0"))
	end := t0.Add(5 * time.Second)
	if got := rate(oneOff, t0, end); got != 1 {
		t.Errorf("one-off events: rate %v, want 1/s", got)
	}
	if got := repeatRate(oneOff, t0, end); got != 0 {
		t.Errorf("one-off events: repeat rate %v, want 0", got)
	}
	if got := repeatRate(loop, t0, end); got != 2 { // 10 requests in 5 s; watches and the patch after the window aside
		t.Errorf("loop: repeat rate %v, want 2/s", got)
	}
}

func TestMetricValueAndProcessStats(t *testing.T) {
	exposition := "# HELP x\nreloader_reload_executed_total{success=\"false\"} 1\nreloader_reload_executed_total{success=\"true\"} 41\nreloader_reload_executed_total_by_namespace{namespace=\"a\"} 5\n"
	if v, ok := MetricValue(exposition, "reloader_reload_executed_total"); !ok || v != 42 {
		t.Errorf("metric %v %v, want 42", v, ok)
	}
	if _, ok := MetricValue(exposition, "reloader_missing"); ok {
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
	if got := len(ScenarioIDs()); got != 23 {
		t.Errorf("%d scenarios", got)
	}
	// all is the design's 19; vs-upstream the preset's four, which all leaves out.
	if sel, err := Select("all"); err != nil || len(sel) != 19 || sel[18].ID != "S19" {
		t.Errorf("all selects %d scenarios, %v", len(sel), err)
	}
	if sel, err := Select("vs-upstream"); err != nil || len(sel) != 4 || sel[0].ID != "U1" || sel[3].ID != "U4" {
		t.Errorf("vs-upstream selects %v, %v", sel, err)
	}
	if _, err := Select("S1,s4,S6"); err != nil {
		t.Error(err)
	}
	if _, err := Select("S99"); err == nil {
		t.Error("unknown scenario accepted")
	}
}
