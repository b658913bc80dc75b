package loadtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sampleReport() Report {
	old := Result{Scenario: "S1", Title: "burst", Side: "old", Reloads: 10, ExpectedMin: 5, ExpectedMax: 50,
		Latency: summarize([]float64{120, 300, 450, 800}), API: &API{Total: 90, Writes: 40, ByVerb: map[string]int{"patch": 40}}, PeakRSSMiB: 48}
	nu := old
	nu.Side = "new"
	nu.Latency = summarize([]float64{100, 200, 310, 420})
	nu.PeakRSSMiB = 39
	return Build([]Result{old, nu}, DefaultGates())
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
	if strings.Count(page, "<svg") != 2 || strings.Count(page, `class="cdf"`) != 2 {
		t.Errorf("want a bar chart and a two-line latency chart; page:\n%s", page)
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
	if err := sampleReport().WriteAll(dir); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	page := "file://" + filepath.Join(dir, "report.html")
	shot := filepath.Join(dir, "report.png")
	common := []string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=" + filepath.Join(dir, "profile")}
	dom, err := exec.CommandContext(ctx, browser, append(common, "--dump-dom", page)...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	for _, want := range []string{"reloader load test: <span class=\"PASS\">PASS</span>", `class="bar"`, `class="cdf"`, "latency p95 (ms)"} {
		if !strings.Contains(string(dom), want) {
			t.Errorf("rendered DOM lacks %q", want)
		}
	}
	if out, err := exec.CommandContext(ctx, browser, append(common, "--screenshot="+shot, "--window-size=1000,800", page)...).CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, out)
	}
	if fi, err := os.Stat(shot); err != nil || fi.Size() < 5000 {
		t.Errorf("screenshot missing or blank: %v", err)
	}
}
