package loadtest

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"
)

// Gates are the limits of a report. A comparative gate judges each side against the other:
// a side FAILs above other×Ratio + Slack and WARNs above the point WarnAt of the way from the
// other's figure to that limit. Correctness gates (missed, duplicate, unexpected, checks) have
// no WARN.
type Gates struct {
	MaxMissed     int `json:"maxMissed"`
	MaxDuplicates int `json:"maxDuplicates"`
	MaxUnexpected int `json:"maxUnexpected"`
	// Each side's p50 and p95 latency from the last write covered may be this many times the
	// other's, plus LatencySlackMs.
	LatencyRatio   float64 `json:"latencyRatio"`
	LatencySlackMs float64 `json:"latencySlackMs"`
	// The p99 from the last write covered.
	P99Ratio   float64 `json:"p99Ratio"`
	P99SlackMs float64 `json:"p99SlackMs"`
	// Each side may make this many times the other's API requests (and writes), plus APISlack.
	APIRatio float64 `json:"apiRatio"`
	APISlack int     `json:"apiSlack"`
	// LISTs (from the audit log).
	ListRatio float64 `json:"listRatio"`
	ListSlack float64 `json:"listSlack"`
	// Errors the controller counted (reloader_errors_total): by default no more than the other.
	ErrorRatio float64 `json:"errorRatio"`
	ErrorSlack float64 `json:"errorSlack"`
	// CPU seconds of the process.
	CPURatio        float64 `json:"cpuRatio"`
	CPUSlackSeconds float64 `json:"cpuSlackSeconds"`
	// Each side's peak RSS may be this many times the other's, plus MemorySlackMiB.
	MemoryRatio    float64 `json:"memoryRatio"`
	MemorySlackMiB float64 `json:"memorySlackMiB"`
	// After the load, repeated requests per second (on an object asked for more than once,
	// watches aside) may exceed the rate before it by at most this: more is a hot loop.
	MaxIdleRPSIncrease float64 `json:"maxIdleRpsIncrease"`
	// The reconcile rate must be back at its rate before the load within this many seconds
	// of the load settling (the run looks ReconcileReturnWindow long at most).
	MaxReconcileReturnSeconds float64 `json:"maxReconcileReturnSeconds"`
	// WarnAt places WARN between the other side's figure (0) and the FAIL limit (1).
	WarnAt float64 `json:"warnAt"`
}

// DefaultGates: no missed, duplicate or unexpected reload; bounded regressions.
func DefaultGates() Gates {
	return Gates{LatencyRatio: 1.5, LatencySlackMs: 500, P99Ratio: 2, P99SlackMs: 1000, APIRatio: 1.25, APISlack: 20,
		ListRatio: 1.25, ListSlack: 5, ErrorRatio: 1, ErrorSlack: 0, CPURatio: 1.5, CPUSlackSeconds: 2,
		MemoryRatio: 1.25, MemorySlackMiB: 16, MaxIdleRPSIncrease: 0.5, MaxReconcileReturnSeconds: 60, WarnAt: 0.5}
}

// Row is one line of a scenario's comparison.
type Row struct {
	Metric   string   `json:"metric"`
	Old      *float64 `json:"old,omitempty"`
	New      *float64 `json:"new,omitempty"`
	Expected string   `json:"expected"`
	// OldVerdict and NewVerdict judge each side on the gate: pass, WARN, FAIL, or empty for
	// figures with no gate and for a side that did not run.
	OldVerdict string `json:"oldVerdict,omitempty"`
	NewVerdict string `json:"newVerdict,omitempty"`
	// Guard marks a guardrail figure (CheckFigure.Summary): quoted in the summary, drawn in
	// the chart.
	Guard bool `json:"guard,omitempty"`
	// short names the gate in a side's list of failures ("missed 3").
	short string
	unit  string
}

// Verdict is one side's verdict on a scenario.
type Verdict struct {
	Ran  bool `json:"ran"`
	Pass bool `json:"pass"`
	// Failed names each gate the side broke, with its figure: "missed 3"; Warned each gate
	// it came near.
	Failed []string `json:"failed,omitempty"`
	Warned []string `json:"warned,omitempty"`
}

// String is "PASS", "WARN (CPU seconds 9.1 s)", "FAIL (missed 3, p95 from last write
// 2000 ms)", or "-" for a side that did not run.
func (v Verdict) String() string {
	switch {
	case !v.Ran:
		return "-"
	case v.Pass && len(v.Warned) == 0:
		return "PASS"
	case v.Pass:
		return "WARN (" + strings.Join(v.Warned, ", ") + ")"
	}
	return "FAIL (" + strings.Join(v.Failed, ", ") + ")"
}

// Level is PASS, WARN or FAIL ("-" for a side that did not run).
func (v Verdict) Level() string {
	switch {
	case !v.Ran:
		return "-"
	case !v.Pass:
		return "FAIL"
	case len(v.Warned) > 0:
		return "WARN"
	}
	return "PASS"
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
	// Builds are each side's binary, version and arguments, and the machine: what it takes
	// to run it again.
	Builds []BuildLine `json:"builds"`
}

// BuildLine is one side of a run as the report states it.
type BuildLine struct {
	Side     string `json:"side"`
	Binary   string `json:"binary"`
	Version  string `json:"version"`
	SHA256   string `json:"sha256"`
	Args     string `json:"args"`
	Cores    int    `json:"cores"`
	Scale    string `json:"scale"`
	Duration string `json:"duration"`
}

// builds states each side once, from its first result.
func builds(results []Result) []BuildLine {
	var out []BuildLine
	seen := map[string]bool{}
	for _, r := range results {
		if seen[r.Side] {
			continue
		}
		seen[r.Side] = true
		d := "design"
		if r.DurationSeconds > 0 {
			d = fmt.Sprintf("%gs", r.DurationSeconds)
		}
		sum := r.Build.SHA256
		if len(sum) > 12 {
			sum = sum[:12]
		}
		out = append(out, BuildLine{Side: r.Side, Binary: r.Binary, Version: r.Build.Version, SHA256: sum,
			Args: strings.Join(r.Build.Args, " "), Cores: r.Cores, Scale: fmt.Sprintf("%g", r.Scale), Duration: d})
	}
	return out
}

// Only is the report of the given scenarios (IDs, any case); the overall verdict is theirs.
func (rep Report) Only(ids []string) (Report, error) {
	want := map[string]bool{}
	for _, id := range ids {
		want[strings.ToUpper(strings.TrimSpace(id))] = true
	}
	out := rep
	out.Sections, out.Pass = nil, true
	for _, s := range rep.Sections {
		if want[s.Scenario] {
			out.Sections = append(out.Sections, s)
			out.Pass = out.Pass && s.Pass
			delete(want, s.Scenario)
		}
	}
	if len(want) > 0 {
		var missing []string
		for id := range want {
			missing = append(missing, id)
		}
		sort.Strings(missing)
		return out, fmt.Errorf("no results for %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// LoadResults reads the per-scenario result files of a results directory.
func LoadResults(dir string) ([]Result, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "[SU]*-*.json"))
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
		return nil, fmt.Errorf("no results (S*-old.json, S*-new.json, U*-...) in %s", dir)
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
	rep := Report{Gates: g, Judged: judged, Pass: true, Builds: builds(results)}
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
		level := verdict(row)
		if level != "FAIL" && level != "WARN" {
			continue
		}
		what := row.short
		if x := value(row); x != nil {
			what += " " + format(x)
			if row.unit != "" {
				what += " " + row.unit
			}
		}
		if level == "FAIL" {
			v.Pass = false
			v.Failed = append(v.Failed, what)
		} else {
			v.Warned = append(v.Warned, what)
		}
	}
	return v
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

// Text writes the summary, then each scenario as an aligned table.
func (rep Report) Text(w io.Writer) {
	rep.summaryText(w)
	fmt.Fprintln(w)
	rep.buildsText(w)
	for _, s := range rep.Sections {
		fmt.Fprintf(w, "\n%s  %s\n  new: %s   old: %s\n", s.Scenario, s.Title, s.NewVerdict, s.OldVerdict)
		width := 42
		for _, r := range s.Rows {
			width = max(width, utf8.RuneCountInString(r.Metric))
		}
		fmt.Fprintf(w, "  %s %10s %10s  %s  %-11s  %s\n", pad("metric", width), "old", "new", pad("gate", 20), "old verdict", "new verdict")
		for _, r := range s.Rows {
			fmt.Fprintf(w, "  %s %10s %10s  %s  %-11s  %s\n", pad(r.Metric, width), format(r.Old), format(r.New), pad(r.Expected, 20), r.OldVerdict, r.NewVerdict)
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
	if lines := rep.guardLines(); len(lines) > 0 {
		fmt.Fprintf(w, "%s\n\n", lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(w, "- %s\n", l)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "| side | binary | --version | sha256 | arguments | cores | scale | duration |\n|---|---|---|---|---|---:|---:|---|\n")
	for _, b := range rep.Builds {
		fmt.Fprintf(w, "| %s | `%s` | %s | %s | `%s` | %d | %s | %s |\n", b.Side, b.Binary, b.Version, b.SHA256, b.Args, b.Cores, b.Scale, b.Duration)
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

// buildsText states each side's binary, version and arguments, and the machine.
func (rep Report) buildsText(w io.Writer) {
	for _, b := range rep.Builds {
		fmt.Fprintf(w, "%s: %s (version %q, sha256 %s) args: %s; %d cores, scale %s, duration %s\n",
			b.Side, b.Binary, b.Version, b.SHA256, b.Args, b.Cores, b.Scale, b.Duration)
	}
}

// Formats are the report's file formats, by extension.
var Formats = []string{"txt", "json", "md", "html"}

// Render writes the report in one format: txt, json, md or html.
func (rep Report) Render(w io.Writer, format string) error {
	switch format {
	case "txt":
		rep.Text(w)
	case "md":
		rep.Markdown(w)
	case "html":
		rep.HTML(w)
	case "json":
		b, err := json.MarshalIndent(struct {
			Report
			Summary []SummaryRow `json:"summary"`
		}{rep, rep.Summary()}, "", "  ")
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	default:
		return fmt.Errorf("unknown report format %q; want one of %s", format, strings.Join(Formats, ", "))
	}
	return nil
}

// WriteFile writes the report to path in the format its extension names.
func (rep Report) WriteFile(path string) error {
	var b strings.Builder
	if err := rep.Render(&b, strings.TrimPrefix(filepath.Ext(path), ".")); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// WriteAll writes report.{txt,json,md,html} into dir, and each scenario's own report as
// scenarios/<ID>.{txt,json,md,html}.
func (rep Report) WriteAll(dir string) error {
	for _, f := range Formats {
		if err := rep.WriteFile(filepath.Join(dir, "report."+f)); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "scenarios"), 0o755); err != nil {
		return err
	}
	for _, s := range rep.Sections {
		one, err := rep.Only([]string{s.Scenario})
		if err != nil {
			return err
		}
		for _, f := range Formats {
			if err := one.WriteFile(filepath.Join(dir, "scenarios", s.Scenario+"."+f)); err != nil {
				return err
			}
		}
	}
	return nil
}
