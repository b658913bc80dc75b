package loadtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reloader-operator/reloader/internal/testutil"
)

// sampleReport: S1 where only the old build misses reloads (the report passes: it is the new
// build's), and S4 run by the new build alone.
func sampleReport() Report {
	old := Result{Scenario: "S1", Title: "burst", Side: "old", Reloads: 40, Missed: 3, ExpectedMin: 5, ExpectedMax: 50,
		Latency: summarize([]float64{120, 300, 450, 800}), LatencyFromLastWrite: summarize([]float64{100, 250, 300, 400}),
		API: &API{Total: 90, Writes: 40, ByVerb: map[string]int{"patch": 40}}, PeakRSSMiB: 48}
	nu := old
	nu.Side, nu.Reloads, nu.Missed = "new", 10, 0
	nu.Latency = summarize([]float64{100, 200, 310, 420})
	nu.LatencyFromLastWrite = summarize([]float64{90, 110})
	nu.API = &API{Total: 80, Writes: 36}
	nu.PeakRSSMiB = 39
	alone := Result{Scenario: "S4", Title: "no-op", Side: "new", API: &API{Total: 12}, PeakRSSMiB: 30}
	return Build([]Result{old, nu, alone}, DefaultGates())
}

func TestHTMLIsSelfContained(t *testing.T) {
	var b strings.Builder
	sampleReport().HTML(&b)
	page := b.String()
	for _, banned := range []string{"<script", "http://cdn", "https://"} {
		if strings.Contains(page, banned) {
			t.Errorf("page contains %q", banned)
		}
	}
	// S1: bars and two latency charts of two lines each; S4: bars and two empty charts.
	if strings.Count(page, "<svg") != 6 || strings.Count(page, `class="cdf"`) != 4 {
		t.Errorf("want per scenario a bar chart and two latency charts, with a line per side; page:\n%s", page)
	}
}

// The page as a browser renders it, offline: headless Chromium, where installed
// (Debian package chromium).
func TestHTMLRendersInHeadlessChromium(t *testing.T) {
	var browser string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		t.Skip("no headless Chromium installed (apt-get install chromium)")
	}
	dir := t.TempDir()
	testutil.Must(t, sampleReport().WriteAll(dir))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	page := "file://" + filepath.Join(dir, "report.html")
	shot := filepath.Join(dir, "report.png")
	common := []string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=" + filepath.Join(dir, "profile")}
	dom, err := exec.CommandContext(ctx, browser, append(common, "--dump-dom", page)...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	for _, want := range []string{
		"reloader load test: <span class=\"PASS\">PASS</span>",
		// The summary table: verdict per side, new/old ratios (rollouts, API requests, API
		// writes, p50 from each write, p50 from last write, peak RSS); S4 ran on one side.
		`<table id="summary">`,
		`<td><a href="#S1">S1</a></td><td class="PASS">PASS</td><td class="FAIL">FAIL (missed 3, API requests 90, API writes 40)</td><td>0.25×</td><td>0.89×</td><td>0.90×</td><td>0.67×</td><td>0.36×</td><td>0.81×</td>`,
		`<td><a href="#S4">S4</a></td><td class="PASS">PASS</td><td class="">-</td><td>0</td><td>12</td>`,
		"OVERALL: PASS (new build); old build: FAIL in S1 (missed 3, API requests 90, API writes 40)",
		// Each scenario's verdict per side, and per gate.
		`new: <span class="PASS">PASS</span> · old: <span class="FAIL">FAIL (missed 3, API requests 90, API writes 40)</span>`,
		`<td>missed reloads</td><td>3</td><td>0</td><td>≤ 0</td><td class="FAIL">FAIL</td><td class="pass">pass</td>`,
		"latency p50 from last write covered (ms)", "latency p95 from each write (ms)",
		`class="bar"`, `class="cdf"`,
	} {
		if !strings.Contains(string(dom), want) {
			t.Errorf("rendered DOM lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("DOM:\n%s", dom)
	}
	if out, err := exec.CommandContext(ctx, browser, append(common, "--screenshot="+shot, "--window-size=1000,800", page)...).CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, out)
	}
	if fi, err := os.Stat(shot); err != nil || fi.Size() < 5000 {
		t.Errorf("screenshot missing or blank: %v", err)
	}
}
