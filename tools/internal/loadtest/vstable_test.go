package loadtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reloader-operator/reloader/internal/testutil"
)

// vsSide is a synthetic result of a vs-upstream scenario: cpu seconds in all, startup of them
// before the load, rss after sync, conflicts (409s) and requests over reloads rollouts.
func vsSide(id, side string, cpu, startup, rss float64, reloads, requests, conflicts, missed int) Result {
	return Result{Scenario: id, Title: Scenarios[id].Title, Side: side, Build: BuildInfo{Version: side + " build"}, Scale: 1, Cores: 2,
		Reloads: reloads, Missed: missed, CPUSeconds: cpu, PeakRSSMiB: rss + 5,
		Usage:   Usage{CPUStartupSeconds: &startup, RSSStartupMiB: &rss},
		API:     &API{Total: requests, Writes: reloads, Conflicts: conflicts},
		Latency: Latency{P50: 900, Max: 1200, Samples: []float64{900, 1200}}}
}

// vsRun is a run of the four scenarios: the baseline like upstream v2 in issue 35 (4.7 ms of
// CPU a rollout, 33 MiB after sync in Burst, 145 in Memory, 1.1 s start-up, 2 requests a
// rollout, no 409s), this build cheaper on every figure (good) or dearer on each (bad).
func vsRun(good bool) []Result {
	var rs []Result
	for _, id := range []string{"U1", "U2", "U3", "U4"} {
		rs = append(rs, vsSide(id, "old", 2.0, 1.1, 33, 200, 400, 0, 0))
		if good {
			// 0.8 s for 200 rollouts, 30 / 60 MiB, 0.9 s start-up, 1.2 requests a rollout.
			rss := 30.0
			if id == "U3" {
				rss = 16 // at most half of 33
			}
			rs = append(rs, vsSide(id, "new", 1.7, 0.9, rss, 200, 240, 0, 0))
		} else {
			// 1.5 s for 150 rollouts (10 ms each), 44 MiB, 2.4 s start-up, 1.4 requests a
			// rollout, 4 conflicts, a missed reload.
			rss := 44.0
			if id == "U3" {
				rss = 17 // more than half of 33, less than all of it
			}
			rs = append(rs, vsSide(id, "new", 3.9, 2.4, rss, 150, 210, 4, 1))
		}
	}
	return rs
}

func renderVs(t *testing.T, runs ...[]Result) []string {
	t.Helper()
	var fr []FigureRun
	for i, rs := range runs {
		fr = append(fr, FigureRun{Dir: []string{"docs/results/vs-a", "docs/results/vs-b"}[i], Results: rs, Report: Build(rs, DefaultGates())})
	}
	var b strings.Builder
	VsUpstream(&b, fr)
	return strings.Split(b.String(), "\n")
}

// targetRows are the table's rows of figures with a target, and the target column of each.
func targetRows(t *testing.T, lines []string) []string {
	t.Helper()
	var out []string
	for _, l := range lines {
		cells := strings.Split(strings.Trim(l, "| "), " | ")
		if len(cells) < 3 || !strings.HasPrefix(l, "| ") || cells[1] == "figure" {
			continue
		}
		if last := cells[len(cells)-1]; strings.HasSuffix(last, ")") {
			out = append(out, last)
		}
	}
	want := 0
	for _, f := range vsFigures {
		if f.target != nil {
			want++
		}
	}
	if len(out) != want {
		t.Fatalf("%d rows with a target, want %d:\n%s", len(out), want, strings.Join(lines, "\n"))
	}
	return out
}

// Every target of the vs-upstream table is met by a build that beats the baseline on each
// figure, and missed, each of them, by one that loses on each.
func TestVsUpstreamTargetsCanFail(t *testing.T) {
	for _, v := range targetRows(t, renderVs(t, vsRun(true))) {
		if !strings.HasPrefix(v, "met (") {
			t.Errorf("target %q, want met", v)
		}
	}
	for _, v := range targetRows(t, renderVs(t, vsRun(false))) {
		if !strings.HasPrefix(v, "**missed** (") {
			t.Errorf("target %q, want missed", v)
		}
	}
}

// The cells: CPU during the load is the run's CPU less the start-up's, per rollout too; RSS
// after sync / peak; requests per rollout; the target judges this build against the last
// run's baseline; a run without a scenario, or a side without a figure, shows "-".
func TestVsUpstreamCells(t *testing.T) {
	bad, good := vsRun(false), vsRun(true)
	noStartup := good[:2]
	noStartup[1].Usage.CPUStartupSeconds, noStartup[1].Usage.RSSStartupMiB, noStartup[1].API = nil, nil, nil
	lines := strings.Join(renderVs(t, bad, noStartup), "\n")
	for _, want := range []string{
		"| scenario | figure | vs-a | this build (same run) | vs-b | this build (same run) | target against vs-b |",
		"| U1 Burst | CPU during the load | 0.90 s for 200 rollouts (4.5 ms each) | 1.50 s for 150 rollouts (10.0 ms each) | 0.90 s for 200 rollouts (4.5 ms each) | - | - (per rollout at most the baseline's) |",
		"|  | RSS after sync / peak | 33.0 / 38.0 MiB | 44.0 / 49.0 MiB | 33.0 / 38.0 MiB | - / 35.0 MiB | - (after sync at most the baseline's) |",
		"|  | API requests per rollout | 2.00 | 1.40 | 2.00 | - | - (at most 1.3) |",
		"|  | 409 conflicts | 0 | 4 | 0 | - | - (none) |",
		// Missed and duplicates need no optional figure: judged.
		"|  | missed / duplicates | 0 / 0 | 1 / 0 | 0 / 0 | 0 / 0 | met (0 missed, 0 duplicates) |",
		"| U2 FanOut | all changed after (p50 / slowest write) | 0.90 / 1.20 s | 0.90 / 1.20 s | - | - |  |",
		"| U3 Memory | RSS after sync / peak | 33.0 / 38.0 MiB | 17.0 / 22.0 MiB | - | - | - (after sync at most half the baseline's) |",
		"|  | CPU at start-up / during the writes | 1.10 / 0.90 s | 2.40 / 1.50 s | - | - | - (start-up at most the baseline's) |",
		"|  | API writes at start-up / during the writes | - / 200 | - / 150 | - | - |  |",
	} {
		if !strings.Contains(lines, want+"\n") {
			t.Errorf("no %q in\n%s", want, lines)
		}
	}
}

// A figures marker starting with vs-upstream renders VsUpstream's table from the U*-*.json
// results of its directories.
func TestVsUpstreamMarker(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "docs/results/vs-v2")
	testutil.Must(t, os.MkdirAll(dir, 0o755))
	for _, r := range vsRun(false) {
		testutil.Must(t, writeJSON(filepath.Join(dir, r.Scenario+"-"+r.Side+".json"), r))
	}
	out, n, err := UpdateFigures("# x\n<!-- figures:begin vs-upstream docs/results/vs-v2 -->\nstale\n<!-- figures:end -->\n", root)
	testutil.Must(t, err)
	if n != 1 || strings.Contains(out, "stale") || !strings.Contains(out, "| U4 ChurnRestart | missed / duplicates | 0 / 0 | 1 / 0 | **missed** (0 missed, 0 duplicates) |\n") {
		t.Errorf("%d blocks:\n%s", n, out)
	}
}
