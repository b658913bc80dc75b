package loadtest

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// Gates are the pass/fail limits of a report.
type Gates struct {
	MaxMissed     int `json:"maxMissed"`
	MaxDuplicates int `json:"maxDuplicates"`
	MaxUnexpected int `json:"maxUnexpected"`
	// Each side's p50 and p95 latency from the last write covered may be this many times the
	// other's, plus LatencySlackMs.
	LatencyRatio   float64 `json:"latencyRatio"`
	LatencySlackMs float64 `json:"latencySlackMs"`
	// Each side may make this many times the other's API requests (and writes), plus APISlack.
	APIRatio float64 `json:"apiRatio"`
	APISlack int     `json:"apiSlack"`
	// Each side's peak RSS may be this many times the other's, plus MemorySlackMiB.
	MemoryRatio    float64 `json:"memoryRatio"`
	MemorySlackMiB float64 `json:"memorySlackMiB"`
	// After the load, repeated requests per second (on an object asked for more than once,
	// watches aside) may exceed the rate before it by at most this: more is a hot loop.
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
	// OldVerdict and NewVerdict judge each side on the gate: pass, FAIL, or empty for
	// figures with no gate and for a side that did not run.
	OldVerdict string `json:"oldVerdict,omitempty"`
	NewVerdict string `json:"newVerdict,omitempty"`
	// short names the gate in a side's list of failures ("missed 3").
	short string
	unit  string
}

// Verdict is one side's verdict on a scenario.
type Verdict struct {
	Ran  bool `json:"ran"`
	Pass bool `json:"pass"`
	// Failed names each gate the side broke, with its figure: "missed 3".
	Failed []string `json:"failed,omitempty"`
}

// String is "PASS", "FAIL (missed 3, p95 from last write 2000 ms)", or "-" for a side that
// did not run.
func (v Verdict) String() string {
	switch {
	case !v.Ran:
		return "-"
	case v.Pass:
		return "PASS"
	}
	return "FAIL (" + strings.Join(v.Failed, ", ") + ")"
}

// Section is one scenario in a report.
type Section struct {
	Scenario   string  `json:"scenario"`
	Title      string  `json:"title"`
	Old        *Result `json:"old,omitempty"`
	New        *Result `json:"new,omitempty"`
	Rows       []Row   `json:"rows"`
	OldVerdict Verdict `json:"oldVerdict"`
	NewVerdict Verdict `json:"newVerdict"`
	// Pass is the verdict of the build under test: see Report.Judged.
	Pass bool `json:"pass"`
}

// Report compares the sides over every scenario.
type Report struct {
	Gates    Gates     `json:"gates"`
	Sections []Section `json:"sections"`
	// Judged is the side whose verdicts decide Pass (and the exit code): new, or old when
	// only an old build ran. The other side's failures are shown, never counted.
	Judged string `json:"judged"`
	Pass   bool   `json:"pass"`
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
	judged := "old"
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
			judged = "new"
		}
	}
	rep := Report{Gates: g, Judged: judged, Pass: true}
	for _, id := range order {
		s := by[id]
		s.Rows = rows(s.Old, s.New, g)
		s.OldVerdict = sideVerdict(s.Old, s.Rows, func(r Row) string { return r.OldVerdict }, func(r Row) *float64 { return r.Old })
		s.NewVerdict = sideVerdict(s.New, s.Rows, func(r Row) string { return r.NewVerdict }, func(r Row) *float64 { return r.New })
		// A scenario the judged build did not run fails (Verdict.Pass is false).
		s.Pass = s.NewVerdict.Pass
		if judged == "old" {
			s.Pass = s.OldVerdict.Pass
		}
		rep.Pass = rep.Pass && s.Pass
		rep.Sections = append(rep.Sections, *s)
	}
	return rep
}

// sideVerdict gathers one side's failed gates.
func sideVerdict(r *Result, rows []Row, verdict func(Row) string, value func(Row) *float64) Verdict {
	if r == nil {
		return Verdict{}
	}
	v := Verdict{Ran: true, Pass: true}
	for _, row := range rows {
		if verdict(row) != "FAIL" {
			continue
		}
		v.Pass = false
		what := row.short
		if x := value(row); x != nil {
			what += " " + format(x)
			if row.unit != "" {
				what += " " + row.unit
			}
		}
		v.Failed = append(v.Failed, what)
	}
	return v
}

func rows(old, nu *Result, g Gates) []Row {
	val := func(r *Result, f func(*Result) float64) *float64 {
		if r == nil || r.Error != "" {
			return nil
		}
		v := f(r)
		return &v
	}
	// judged sets a side's verdict where it has a figure.
	judged := func(v *float64, fail bool) string {
		switch {
		case v == nil:
			return ""
		case fail:
			return "FAIL"
		}
		return "pass"
	}
	var out []Row
	// atMost gates each side on its own.
	atMost := func(metric, short string, limit float64, f func(*Result) float64) {
		row := Row{Metric: metric, short: short, Old: val(old, f), New: val(nu, f), Expected: fmt.Sprintf("≤ %g", limit)}
		row.OldVerdict = judged(row.Old, row.Old != nil && *row.Old > limit)
		row.NewVerdict = judged(row.New, row.New != nil && *row.New > limit)
		out = append(out, row)
	}
	// bounded gates each side against the other: new may be ratio times old plus slack, and
	// so may old against new, so a build far behind the other fails whichever side it is on.
	// With one side it is only shown.
	bounded := func(metric, short, unit string, ratio, slack float64, f func(*Result) float64) {
		row := Row{Metric: metric, short: short, Old: val(old, f), New: val(nu, f), unit: unit}
		if row.Old != nil && row.New != nil {
			row.Expected = fmt.Sprintf("≤ other×%g + %g", ratio, slack)
			row.OldVerdict = judged(row.Old, *row.Old > *row.New*ratio+slack)
			row.NewVerdict = judged(row.New, *row.New > *row.Old*ratio+slack)
		}
		out = append(out, row)
	}
	info := func(metric, unit string, f func(*Result) float64) {
		out = append(out, Row{Metric: metric, Old: val(old, f), New: val(nu, f), unit: unit})
	}
	for _, r := range []*Result{old, nu} {
		if r != nil && r.Error != "" {
			row := Row{Metric: r.Side + " run failed: " + r.Error, short: "run failed"}
			if r == old {
				row.OldVerdict = "FAIL"
			} else {
				row.NewVerdict = "FAIL"
			}
			out = append(out, row)
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
	out = append(out, Row{Metric: RowReloads, Old: val(old, func(r *Result) float64 { return float64(r.Reloads) }),
		New: val(nu, func(r *Result) float64 { return float64(r.Reloads) }), Expected: expected})
	atMost("missed reloads", "missed", float64(g.MaxMissed), func(r *Result) float64 { return float64(r.Missed) })
	atMost("duplicate reloads", "duplicates", float64(g.MaxDuplicates), func(r *Result) float64 { return float64(r.Duplicates) })
	atMost("unexpected reloads", "unexpected", float64(g.MaxUnexpected), func(r *Result) float64 { return float64(r.Unexpected) })
	// Latency is gated from the last write each rollout covered, which judges a build that
	// coalesces writes and one that rolls for each alike; from each write is shown beside it.
	bounded(RowP50FromLast, "p50 from last write", "ms", g.LatencyRatio, g.LatencySlackMs, func(r *Result) float64 { return r.LatencyFromLastWrite.P50 })
	bounded("latency p95 from last write covered (ms)", "p95 from last write", "ms", g.LatencyRatio, g.LatencySlackMs, func(r *Result) float64 { return r.LatencyFromLastWrite.P95 })
	info("latency p99 from last write covered (ms)", "ms", func(r *Result) float64 { return r.LatencyFromLastWrite.P99 })
	info(RowP50FromEach, "ms", func(r *Result) float64 { return r.Latency.P50 })
	info("latency p95 from each write (ms)", "ms", func(r *Result) float64 { return r.Latency.P95 })
	info("latency p99 from each write (ms)", "ms", func(r *Result) float64 { return r.Latency.P99 })
	hasAPI := (old == nil || old.API != nil) && (nu == nil || nu.API != nil)
	if hasAPI {
		bounded(RowAPIRequests, "API requests", "", g.APIRatio, float64(g.APISlack), func(r *Result) float64 { return float64(r.API.Total) })
		bounded(RowAPIWrites, "API writes", "", g.APIRatio, float64(g.APISlack), func(r *Result) float64 { return float64(r.API.Writes) })
		info("API LISTs", "", func(r *Result) float64 { return float64(r.API.Lists) })
		info("API WATCHes (and streamed lists)", "", func(r *Result) float64 { return float64(r.API.ByVerb["watch"]) })
		info("API 409 conflicts", "", func(r *Result) float64 { return float64(r.API.Conflicts) })
		info("idle req/s after load", "req/s", func(r *Result) float64 { return r.IdleRPSAfter })
		row := Row{Metric: "repeated req/s after load (hot loop)", short: "hot loop", unit: "req/s",
			Old: val(old, func(r *Result) float64 { return r.RepeatRPSAfter }), New: val(nu, func(r *Result) float64 { return r.RepeatRPSAfter }),
			Expected: fmt.Sprintf("≤ before load + %g", g.MaxIdleRPSIncrease)}
		hot := func(r *Result) bool { return r.RepeatRPSAfter > r.RepeatRPSBefore+g.MaxIdleRPSIncrease }
		row.OldVerdict = judged(row.Old, row.Old != nil && hot(old))
		row.NewVerdict = judged(row.New, row.New != nil && hot(nu))
		out = append(out, row)
	}
	info("CPU seconds", "s", func(r *Result) float64 { return r.CPUSeconds })
	bounded(RowPeakRSS, "peak RSS", "MiB", g.MemoryRatio, g.MemorySlackMiB, func(r *Result) float64 { return r.PeakRSSMiB })
	return out
}

// Rows the summary table quotes.
const (
	RowReloads     = "reloads"
	RowP50FromLast = "latency p50 from last write covered (ms)"
	RowP50FromEach = "latency p50 from each write (ms)"
	RowAPIRequests = "API requests"
	RowAPIWrites   = "API writes"
	RowPeakRSS     = "peak RSS (MiB)"
)

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

// Text writes the summary, then each scenario as an aligned table.
func (rep Report) Text(w io.Writer) {
	rep.summaryText(w)
	for _, s := range rep.Sections {
		fmt.Fprintf(w, "\n%s  %s\n  new: %s   old: %s\n", s.Scenario, s.Title, s.NewVerdict, s.OldVerdict)
		fmt.Fprintf(w, "  %-42s %10s %10s  %s  %-11s  %s\n", "metric", "old", "new", pad("gate", 20), "old verdict", "new verdict")
		for _, r := range s.Rows {
			fmt.Fprintf(w, "  %-42s %10s %10s  %s  %-11s  %s\n", r.Metric, format(r.Old), format(r.New), pad(r.Expected, 20), r.OldVerdict, r.NewVerdict)
		}
	}
	fmt.Fprintf(w, "\n%s\n", rep.overall())
}

// Markdown writes the report for a pull-request comment.
func (rep Report) Markdown(w io.Writer) {
	fmt.Fprintf(w, "## Load test: %s\n\n%s\n\n", verdict(rep.Pass), rep.summaryNote())
	fmt.Fprintf(w, "| scenario | new | old | %s |\n|---|---|---|%s\n", strings.Join(SummaryHeader, " | "), strings.Repeat("---:|", len(SummaryHeader)))
	for _, s := range rep.Summary() {
		cells := []string{s.Scenario, mdVerdict(s.New), mdVerdict(s.Old)}
		for _, p := range s.Figures() {
			cells = append(cells, p.Ratio())
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	fmt.Fprintln(w)
	for _, s := range rep.Sections {
		fmt.Fprintf(w, "### %s %s\n\nnew: %s, old: %s\n\n| metric | old | new | gate | old verdict | new verdict |\n|---|---:|---:|---|---|---|\n",
			s.Scenario, s.Title, mdVerdict(s.NewVerdict), mdVerdict(s.OldVerdict))
		for _, r := range s.Rows {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", r.Metric, format(r.Old), format(r.New), r.Expected, mdRowVerdict(r.OldVerdict), mdRowVerdict(r.NewVerdict))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%s\n", rep.overall())
}

// pad fills s with spaces to n characters (fmt pads by bytes, and gates hold "≤" and "×").
func pad(s string, n int) string {
	return s + strings.Repeat(" ", max(0, n-utf8.RuneCountInString(s)))
}

func mdVerdict(v Verdict) string {
	if v.Ran && !v.Pass {
		return "**" + v.String() + "**"
	}
	return v.String()
}

func mdRowVerdict(v string) string {
	if v == "FAIL" {
		return "**FAIL**"
	}
	return v
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
	return writeJSON(filepath.Join(dir, "report.json"), struct {
		Report
		Summary []SummaryRow `json:"summary"`
	}{rep, rep.Summary()})
}
