package loadtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reloader-operator/reloader/internal/proc"
)

// The tool end to end, on real control planes: a correct build passes the correctness gates
// of S4 (nothing may reload) and S6 (restart mid-load), and a build that notifies instead of
// reloading is caught missing reloads. No timing is asserted.
func TestSmokeRunAndReport(t *testing.T) {
	if testing.Short() {
		t.Skip("starts control planes")
	}
	bin, err := proc.Build("../../cmd/reloader", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var progress strings.Builder
	scenarios, err := Select("S4,S6")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	results, err := Run(ctx, Config{
		Sides:     []Side{{Name: "old", Bin: bin, Args: []string{"--webhook-url=http://127.0.0.1:9/"}}, {Name: "new", Bin: bin}},
		Scenarios: scenarios, Params: Params{Scale: 1, Duration: 4 * time.Second},
		ResultsDir: dir, MetricsAddrFlag: "--metrics-addr", Nodes: 1, Progress: &progress,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(progress.String())
	if len(results) != 4 {
		t.Fatalf("%d results", len(results))
	}
	for _, r := range results {
		if r.Error != "" {
			t.Fatalf("%s %s: %s", r.Scenario, r.Side, r.Error)
		}
		if r.API == nil || r.API.Total == 0 || r.PeakRSSMiB <= 0 {
			t.Errorf("%s %s measured nothing: api %+v, rss %v", r.Scenario, r.Side, r.API, r.PeakRSSMiB)
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
	if err := rep.WriteAll(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"report.txt", "report.json", "report.md", "report.html"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() == 0 {
			t.Errorf("%s not written: %v", name, err)
		}
	}
}
