package loadtest

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// Gates are the pass/fail limits of a report.
type Gates struct {
	MaxMissed     int `json:"maxMissed"`
	MaxDuplicates int `json:"maxDuplicates"`
	MaxUnexpected int `json:"maxUnexpected"`
	// New may be this many times slower (p95) than old, plus LatencySlackMs.
	LatencyRatio   float64 `json:"latencyRatio"`
	LatencySlackMs float64 `json:"latencySlackMs"`
	// New may make this many times old's API requests, plus APISlack.
	APIRatio float64 `json:"apiRatio"`
	APISlack int     `json:"apiSlack"`
	// New's peak RSS may be this many times old's, plus MemorySlackMiB.
	MemoryRatio    float64 `json:"memoryRatio"`
	MemorySlackMiB float64 `json:"memorySlackMiB"`
	// After the load, requests per second (watches aside) may exceed the idle rate before it
	// by at most this: more is a hot loop.
	MaxIdleRPSIncrease float64 `json:"maxIdleRpsIncrease"`
}

// DefaultGates: no missed, duplicate or unexpected reload; bounded regressions.
func DefaultGates() Gates {
	return Gates{LatencyRatio: 1.5, LatencySlackMs: 500, APIRatio: 1.25, APISlack: 20,
		MemoryRatio: 1.25, MemorySlackMiB: 16, MaxIdleRPSIncrease: 0.5}
}

// Row is one line of a scenario's comparison.
type Row struct {
	Metric   string   `json:"metric"`
	Old      *float64 `json:"old,omitempty"`
	New      *float64 `json:"new,omitempty"`
	Expected string   `json:"expected"`
	// Verdict is pass, FAIL, or empty for figures with no gate.
	Verdict string `json:"verdict"`
	unit    string
}

// Section is one scenario in a report.
type Section struct {
	Scenario string  `json:"scenario"`
	Title    string  `json:"title"`
	Old      *Result `json:"old,omitempty"`
	New      *Result `json:"new,omitempty"`
	Rows     []Row   `json:"rows"`
	Pass     bool    `json:"pass"`
}

// Report compares the sides over every scenario.
type Report struct {
	Gates    Gates     `json:"gates"`
	Sections []Section `json:"sections"`
	Pass     bool      `json:"pass"`
}

// LoadResults reads the per-scenario result files of a results directory.
func LoadResults(dir string) ([]Result, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "S*-*.json"))
	if err != nil {
		return nil, err
	}
	var out []Result
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var r Result
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no results (S*-old.json, S*-new.json) in %s", dir)
	}
	sortResults(out)
	return out, nil
}

// Build judges results against gates.
func Build(results []Result, g Gates) Report {
	by := map[string]*Section{}
	var order []string
	for i := range results {
		r := &results[i]
		s, ok := by[r.Scenario]
		if !ok {
			s = &Section{Scenario: r.Scenario, Title: r.Title}
			by[r.Scenario] = s
			order = append(order, r.Scenario)
		}
		if r.Side == "old" {
			s.Old = r
		} else {
			s.New = r
		}
	}
	rep := Report{Gates: g, Pass: true}
	for _, id := range order {
		s := by[id]
		s.Rows, s.Pass = rows(s.Old, s.New, g)
		rep.Pass = rep.Pass && s.Pass
		rep.Sections = append(rep.Sections, *s)
	}
	return rep
}

func rows(old, nu *Result, g Gates) ([]Row, bool) {
	val := func(r *Result, f func(*Result) float64) *float64 {
		if r == nil || r.Error != "" {
			return nil
		}
		v := f(r)
		return &v
	}
	pass := true
	var out []Row
	// atMost gates each side on its own.
	atMost := func(metric string, limit float64, f func(*Result) float64) {
		row := Row{Metric: metric, Old: val(old, f), New: val(nu, f), Expected: fmt.Sprintf("≤ %g", limit), Verdict: "pass"}
		for _, v := range []*float64{row.Old, row.New} {
			if v != nil && *v > limit {
				row.Verdict = "FAIL"
			}
		}
		pass = pass && row.Verdict == "pass"
		out = append(out, row)
	}
	// bounded gates new against old; with one side it is only shown.
	bounded := func(metric, unit string, ratio, slack float64, f func(*Result) float64) {
		row := Row{Metric: metric, Old: val(old, f), New: val(nu, f), unit: unit}
		if row.Old != nil && row.New != nil {
			limit := *row.Old*ratio + slack
			row.Expected = fmt.Sprintf("new ≤ %.4g", limit)
			row.Verdict = "pass"
			if *row.New > limit {
				row.Verdict = "FAIL"
				pass = false
			}
		}
		out = append(out, row)
	}
	info := func(metric, unit string, f func(*Result) float64) {
		out = append(out, Row{Metric: metric, Old: val(old, f), New: val(nu, f), unit: unit})
	}
	for _, r := range []*Result{old, nu} {
		if r != nil && r.Error != "" {
			out = append(out, Row{Metric: r.Side + " run failed: " + r.Error, Verdict: "FAIL"})
			pass = false
		}
	}
	booked := old // either side booked the same writes
	if booked == nil || booked.Error != "" {
		booked = nu
	}
	expected := ""
	if booked != nil {
		expected = fmt.Sprintf("%d..%d", booked.ExpectedMin, booked.ExpectedMax)
	}
	out = append(out, Row{Metric: "reloads", Old: val(old, func(r *Result) float64 { return float64(r.Reloads) }),
		New: val(nu, func(r *Result) float64 { return float64(r.Reloads) }), Expected: expected})
	atMost("missed reloads", float64(g.MaxMissed), func(r *Result) float64 { return float64(r.Missed) })
	atMost("duplicate reloads", float64(g.MaxDuplicates), func(r *Result) float64 { return float64(r.Duplicates) })
	atMost("unexpected reloads", float64(g.MaxUnexpected), func(r *Result) float64 { return float64(r.Unexpected) })
	bounded("latency p50 (ms)", "ms", g.LatencyRatio, g.LatencySlackMs, func(r *Result) float64 { return r.Latency.P50 })
	bounded("latency p95 (ms)", "ms", g.LatencyRatio, g.LatencySlackMs, func(r *Result) float64 { return r.Latency.P95 })
	info("latency p99 (ms)", "ms", func(r *Result) float64 { return r.Latency.P99 })
	hasAPI := (old == nil || old.API != nil) && (nu == nil || nu.API != nil)
	if hasAPI {
		bounded("API requests", "", g.APIRatio, float64(g.APISlack), func(r *Result) float64 { return float64(r.API.Total) })
		bounded("API writes", "", g.APIRatio, float64(g.APISlack), func(r *Result) float64 { return float64(r.API.Writes) })
		info("API LISTs", "", func(r *Result) float64 { return float64(r.API.Lists) })
		info("API WATCHes (and streamed lists)", "", func(r *Result) float64 { return float64(r.API.ByVerb["watch"]) })
		info("API 409 conflicts", "", func(r *Result) float64 { return float64(r.API.Conflicts) })
		row := Row{Metric: "idle req/s after load (hot loop)", unit: "req/s",
			Old: val(old, func(r *Result) float64 { return r.IdleRPSAfter }), New: val(nu, func(r *Result) float64 { return r.IdleRPSAfter }),
			Expected: fmt.Sprintf("≤ idle before + %g", g.MaxIdleRPSIncrease), Verdict: "pass"}
		for _, r := range []*Result{old, nu} {
			if r != nil && r.Error == "" && r.IdleRPSAfter > r.IdleRPSBefore+g.MaxIdleRPSIncrease {
				row.Verdict = "FAIL"
			}
		}
		pass = pass && row.Verdict == "pass"
		out = append(out, row)
	}
	info("CPU seconds", "s", func(r *Result) float64 { return r.CPUSeconds })
	bounded("peak RSS (MiB)", "MiB", g.MemoryRatio, g.MemorySlackMiB, func(r *Result) float64 { return r.PeakRSSMiB })
	return out, pass
}

func format(v *float64) string {
	if v == nil {
		return "-"
	}
	if *v == math.Trunc(*v) && math.Abs(*v) < 1e9 {
		return fmt.Sprintf("%.0f", *v)
	}
	return fmt.Sprintf("%.2f", *v)
}

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// Text writes the report as aligned tables.
func (rep Report) Text(w io.Writer) {
	for _, s := range rep.Sections {
		fmt.Fprintf(w, "\n%s  %s  [%s]\n", s.Scenario, s.Title, verdict(s.Pass))
		fmt.Fprintf(w, "  %-34s %12s %12s  %-22s %s\n", "metric", "old", "new", "expected", "result")
		for _, r := range s.Rows {
			fmt.Fprintf(w, "  %-34s %12s %12s  %-22s %s\n", r.Metric, format(r.Old), format(r.New), r.Expected, r.Verdict)
		}
	}
	fmt.Fprintf(w, "\nOVERALL: %s\n", verdict(rep.Pass))
}

// Markdown writes the report for a pull-request comment.
func (rep Report) Markdown(w io.Writer) {
	fmt.Fprintf(w, "## Load test: %s\n\n", verdict(rep.Pass))
	for _, s := range rep.Sections {
		fmt.Fprintf(w, "### %s %s: %s\n\n| metric | old | new | expected | result |\n|---|---:|---:|---|---|\n", s.Scenario, s.Title, verdict(s.Pass))
		for _, r := range s.Rows {
			v := r.Verdict
			if v == "FAIL" {
				v = "**FAIL**"
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", r.Metric, format(r.Old), format(r.New), r.Expected, v)
		}
		fmt.Fprintln(w)
	}
}

// WriteAll writes report.txt, report.json, report.md and report.html into dir.
func (rep Report) WriteAll(dir string) error {
	var txt, md, html strings.Builder
	rep.Text(&txt)
	rep.Markdown(&md)
	rep.HTML(&html)
	for name, content := range map[string]string{"report.txt": txt.String(), "report.md": md.String(), "report.html": html.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return writeJSON(filepath.Join(dir, "report.json"), rep)
}
