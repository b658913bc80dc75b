package loadtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reloader-operator/reloader/internal/testutil"
)

// figureResults writes two runs of this build against two baselines: v1-full (S1; S2 where
// this build's run failed; S4 without API counts) and v2-full (S1 against a slower
// baseline, S3 only there, S4 as in v1-full), without load averages in v2-full.
func figureResults(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	side := func(id, title, name, version string, rss, cpu, p50 float64, api *API) Result {
		return Result{Scenario: id, Title: title, Side: name, Build: BuildInfo{Version: version}, Scale: 1, Cores: 2,
			Workloads: 100, Writes: 100, ExpectedMin: 100, ExpectedMax: 100, Reloads: 100,
			LatencyFromLastWrite: Latency{P50: p50, P95: p50, P99: p50}, Latency: Latency{P50: p50},
			API: api, PeakRSSMiB: rss, CPUSeconds: cpu}
	}
	const (
		v1  = "github.com/stakater/Reloader v1.4.21 (build info, go1.24.0)"
		v2  = "github.com/stakater/Reloader v2.0.0 (build info, go1.25.0)"
		new = "reloader 0.1.0 (commit 1c54280507e4, go1.25.0)"
	)
	write := func(dir string, rs ...Result) {
		testutil.Must(t, os.MkdirAll(filepath.Join(root, dir), 0o755))
		for _, r := range rs {
			testutil.Must(t, writeJSON(filepath.Join(root, dir, r.Scenario+"-"+r.Side+".json"), r))
		}
	}
	withLoad := func(r Result, load ...float64) Result { r.LoadAvg = load; return r }
	failed := side("S2", "churn", "new", new, 0, 0, 0, &API{})
	failed.Reloads, failed.Error = 0, "control plane did not start"
	write("docs/results/v1-full",
		withLoad(side("S1", "burst", "old", v1, 100, 10, 1000, &API{Total: 1000, Writes: 100}), 3.5, 7.25),
		withLoad(side("S1", "burst", "new", new, 96, 40.5, 20, &API{Total: 1050, Writes: 100}), 7.25, 12),
		side("S2", "churn", "old", v1, 50, 5, 300, &API{Total: 500, Writes: 100}),
		failed,
		side("S4", "no-op | idle", "old", v1, 40, 1, 0, nil),
		side("S4", "no-op | idle", "new", new, 44, 1, 0, nil))
	write("docs/results/v2-full",
		side("S1", "burst", "old", v2, 100, 30, 1000, &API{Total: 1000, Writes: 100}),
		side("S1", "burst", "new", new, 96, 40.5, 20, &API{Total: 1050, Writes: 100}),
		side("S3", "namespaces", "old", v2, 100, 10, 200, &API{Total: 8000, Writes: 100, Lists: 7331}),
		side("S3", "namespaces", "new", new, 100, 10, 200, &API{Total: 4000, Writes: 100}),
		side("S4", "no-op | idle", "old", v2, 40, 1, 0, nil),
		side("S4", "no-op | idle", "new", new, 44, 1, 0, nil))
	return root
}

func TestFiguresTwoBaselines(t *testing.T) {
	root := figureResults(t)
	runs, err := LoadFigureRuns(root, []string{"docs/results/v1-full", "docs/results/v2-full"})
	testutil.Must(t, err)
	var b strings.Builder
	Figures(&b, runs)
	got := b.String()
	for _, want := range []string{
		"- `docs/results/v1-full`: baseline `github.com/stakater/Reloader v1.4.21 (build info, go1.24.0)` against this build `reloader 0.1.0 (commit 1c54280507e4, go1.25.0)`; scale 1, each scenario's design duration; 2 cores; load average 3.5 to 12.0 (1-minute, at each scenario's start and end).\n",
		"- `docs/results/v2-full`: baseline `github.com/stakater/Reloader v2.0.0 (build info, go1.25.0)` against this build `reloader 0.1.0 (commit 1c54280507e4, go1.25.0)`; scale 1, each scenario's design duration; 2 cores; load average not recorded.\n",
		"| scenario | this build | v1-full | v1-full: API requests | v1-full: p50 from last write | v1-full: peak RSS | v1-full: CPU | v2-full | v2-full: API requests | v2-full: p50 from last write | v2-full: peak RSS | v2-full: CPU |\n|---|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|\n",
		// This build's verdict differs by baseline (its CPU gate is relative): each, labelled.
		"| S1 burst | v1-full: FAIL (CPU seconds 40.50 s); v2-full: WARN (CPU seconds 40.50 s) | FAIL (p50 from last write 1,000 ms, p95 from last write 1,000 ms) | 1.05× | 0.02× | 0.96× | 4.05× | FAIL (p50 from last write 1,000 ms, p95 from last write 1,000 ms) | 1.05× | 0.02× | 0.96× | 1.35× |\n",
		// A side whose run failed: its verdict says so, its figures are not compared; the
		// baseline that did not run the scenario has "-" throughout.
		"| S2 churn | v1-full: FAIL (run failed) | PASS | - | - | - | - | - | - | - | - | - |\n",
		// Only in v2-full; thousands separated as the README writes them.
		"| S3 namespaces | v2-full: PASS | - | - | - | - | - | FAIL (API requests 8,000, LISTs 7,331) | 0.50× | 1.00× | 1.00× | 1.00× |\n",
		// The same verdict against both is said once; no API counts: "-"; "|" escaped.
		"| S4 no-op \\| idle | PASS | PASS | - | 1.00× | 1.10× | 1.00× | PASS | - | 1.00× | 1.10× | 1.00× |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
	if i, j, k := strings.Index(got, "| S1 "), strings.Index(got, "| S3 "), strings.Index(got, "| S4 "); i < 0 || i > j || j > k {
		t.Errorf("scenarios out of order:\n%s", got)
	}
}

func TestFiguresOneBaseline(t *testing.T) {
	root := figureResults(t)
	runs, err := LoadFigureRuns(root, []string{"docs/results/v1-full"})
	testutil.Must(t, err)
	var b strings.Builder
	Figures(&b, runs)
	for _, want := range []string{
		"| scenario | this build | v1-full | API requests | p50 from last write | peak RSS | CPU |\n|---|---|---|---:|---:|---:|---:|\n",
		"| S1 burst | FAIL (CPU seconds 40.50 s) | FAIL (p50 from last write 1,000 ms, p95 from last write 1,000 ms) | 1.05× | 0.02× | 0.96× | 4.05× |\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
	if _, err := LoadFigureRuns(root, []string{"docs/results/none"}); err == nil {
		t.Error("a results directory that does not exist loaded")
	}
}

func TestFigureRatioAndDigits(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, c := range []struct {
		p    Pair
		want string
	}{
		{Pair{Old: f(1000), New: f(23.4)}, "0.02×"},
		{Pair{Old: f(10), New: f(40.5)}, "4.05×"},
		{Pair{Old: f(10), New: f(156.2)}, "15.6×"},
		{Pair{Old: f(1), New: f(84)}, "84.0×"},
		{Pair{Old: f(1), New: f(184.4)}, "184×"},
		{Pair{Old: f(0), New: f(3)}, "∞"},
		{Pair{Old: f(0), New: f(0)}, "1.00×"},
		{Pair{Old: f(1)}, "-"},
		{Pair{New: f(1)}, "-"},
	} {
		if got := figureRatio(c.p); got != c.want {
			t.Errorf("figureRatio(%s) = %q, want %q", c.p.Ratio(), got, c.want)
		}
	}
	if got, want := groupDigits("p50 40143.15 ms, LISTs 7331, missed 12, x 1234567.00012"), "p50 40,143.15 ms, LISTs 7,331, missed 12, x 1,234,567.00012"; got != want {
		t.Errorf("groupDigits = %q, want %q", got, want)
	}
}

func TestUpdateFigures(t *testing.T) {
	root := figureResults(t)
	doc := "# Page\n\nBefore.\n\n<!-- figures:begin docs/results/v1-full -->\n| pasted | by hand |\n<!-- figures:end -->\n\nAfter.\n"
	out, n, err := UpdateFigures(doc, root)
	testutil.Must(t, err)
	runs, err := LoadFigureRuns(root, []string{"docs/results/v1-full"})
	testutil.Must(t, err)
	var table strings.Builder
	Figures(&table, runs)
	want := "# Page\n\nBefore.\n\n<!-- figures:begin docs/results/v1-full -->\n\n" + table.String() + "\n<!-- figures:end -->\n\nAfter.\n"
	if n != 1 || out != want {
		t.Fatalf("%d blocks; got\n%s\nwant\n%s", n, out, want)
	}
	again, n, err := UpdateFigures(out, root)
	testutil.Must(t, err)
	if n != 1 || again != out {
		t.Errorf("rendering a rendered page changed it:\n%s", again)
	}
	if same, n, err := UpdateFigures("no markers\n", root); err != nil || n != 0 || same != "no markers\n" {
		t.Errorf("a page without markers: %q, %d, %v", same, n, err)
	}
	for doc, want := range map[string]string{
		"<!-- figures:begin docs/results/v1-full -->\nx\n":                 "no <!-- figures:end --> after it",
		"x\n<!-- figures:end -->\n":                                        "without a begin marker",
		"<!-- figures:begin -->\n<!-- figures:end -->\n":                   "want <!-- figures:begin DIR",
		"<!-- figures:begin docs/results/none -->\n<!-- figures:end -->\n": "no results",
		"<!-- figures:begin docs/results/v1-full -->\n<!-- figures:begin docs/results/v1-full -->\n<!-- figures:end -->\n": "inside the block of line 1",
	} {
		if _, _, err := UpdateFigures(doc, root); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one saying %q", doc, err, want)
		}
	}
}

func TestLoadAverage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loadavg")
	testutil.Must(t, os.WriteFile(path, []byte("7.25 3.10 1.05 2/345 6789\n"), 0o644))
	if v, ok := loadAverage(path); !ok || v != 7.25 {
		t.Errorf("loadAverage = %v, %v; want 7.25", v, ok)
	}
	if _, ok := loadAverage(filepath.Join(t.TempDir(), "none")); ok {
		t.Error("a missing file gave a load average")
	}
}

// The totals under the table are summed from the results, never written by hand: each side's
// missed, duplicate and unexpected reloads with the scenarios that count them, and the
// scenarios it FAILs; a side whose run failed counts nothing.
func TestFiguresTotals(t *testing.T) {
	root := t.TempDir()
	dir := "docs/results/base"
	testutil.Must(t, os.MkdirAll(filepath.Join(root, dir), 0o755))
	res := func(id, side string, reloads, missed, dups, unexpected int) Result {
		return Result{Scenario: id, Title: "t", Side: side, Scale: 1, Cores: 2, Workloads: 100, Writes: 100,
			ExpectedMin: 100, ExpectedMax: 100, Reloads: reloads, Missed: missed, Duplicates: dups, Unexpected: unexpected,
			API: &API{Total: 100, Writes: 100}, PeakRSSMiB: 10, CPUSeconds: 1}
	}
	broken := res("S3", "new", 0, 0, 0, 0)
	broken.Error = "control plane did not start"
	brokenOld := res("S3", "old", 0, 1234, 0, 0)
	brokenOld.Error = "did not start"
	for _, r := range []Result{
		res("S1", "old", 60, 40, 0, 0), res("S1", "new", 100, 0, 0, 0),
		res("S2", "old", 101, 0, 1, 0), res("S2", "new", 100, 0, 0, 0),
		broken, brokenOld,
		res("S10", "old", 100, 1200, 0, 0), res("S10", "new", 100, 0, 0, 2),
	} {
		testutil.Must(t, writeJSON(filepath.Join(root, dir, r.Scenario+"-"+r.Side+".json"), r))
	}
	runs, err := LoadFigureRuns(root, []string{dir})
	testutil.Must(t, err)
	var b strings.Builder
	Figures(&b, runs)
	want := "- `base`: this build 0 missed, 0 duplicates, 2 unexpected (S10 2); FAIL in S3, S10; " +
		"the baseline 1,240 missed (S1 40, S10 1,200), 1 duplicate (S2 1), 0 unexpected; FAIL in S1, S2, S3, S10.\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("no %q in\n%s", want, b.String())
	}
}

// TestUpdateFiguresGuardrails: a guardrails block quotes each run's guardrail lines as the
// report prints them, re-rendered from the results; a run without guardrail scenarios says so.
func TestUpdateFiguresGuardrails(t *testing.T) {
	root := figureResults(t)
	flapped := func(side string, most float64) Result {
		return Result{Scenario: "S18", Title: "flapping Secret", Side: side, Reloads: int(most) * 5, ExpectedMin: 5, ExpectedMax: 155,
			API: &API{Total: 100, Writes: 50}, Checks: []CheckFigure{{Name: "rollouts per workload while two writers flapped its Secret (most)", Value: most, Max: limit(flapHandful), Summary: true}}}
	}
	dir := filepath.Join(root, "docs/results/guarded")
	testutil.Must(t, os.MkdirAll(dir, 0o755))
	for _, r := range []Result{flapped("old", 30), flapped("new", 4)} {
		testutil.Must(t, writeJSON(filepath.Join(dir, "S18-"+r.Side+".json"), r))
	}
	doc := "<!-- figures:begin guardrails docs/results/guarded docs/results/v1-full -->\n    S18 pasted by hand: old 1, new 1\n<!-- figures:end -->\n"
	out, n, err := UpdateFigures(doc, root)
	testutil.Must(t, err)
	for _, want := range []string{
		"`docs/results/guarded`:\n\n    S18 rollouts (template changes, all workloads): old 150, new 20; API writes: old 50, new 50\n    S18 rollouts per workload while two writers flapped its Secret (most): old 30 FAIL, new 4\n",
		"`docs/results/v1-full`:\n\n    (no guardrail scenario in these results)\n",
	} {
		if n != 1 || !strings.Contains(out, want) {
			t.Errorf("%d blocks; got\n%s\nwant it to hold\n%s", n, out, want)
		}
	}
	if strings.Contains(out, "pasted by hand") {
		t.Errorf("the pasted line was kept:\n%s", out)
	}
}
