package loadtest

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Pair is one figure of both sides.
type Pair struct {
	Old *float64 `json:"old,omitempty"`
	New *float64 `json:"new,omitempty"`
}

// Ratio is new/old ("0.10×"); with one side it is that side's figure, so a one-sided run
// still reads; "-" when neither side has it.
func (p Pair) Ratio() string {
	switch {
	case p.Old != nil && p.New != nil:
		if *p.Old == 0 {
			if *p.New == 0 {
				return "1.00×"
			}
			return "∞ (old 0)"
		}
		return fmt.Sprintf("%.2f×", *p.New / *p.Old)
	case p.New != nil:
		return format(p.New)
	}
	return format(p.Old)
}

// SummaryRow is one scenario on the report's first screen.
type SummaryRow struct {
	Scenario    string  `json:"scenario"`
	New         Verdict `json:"new"`
	Old         Verdict `json:"old"`
	Rollouts    Pair    `json:"rollouts"`
	APIRequests Pair    `json:"apiRequests"`
	APIWrites   Pair    `json:"apiWrites"`
	P50FromEach Pair    `json:"p50FromEachWriteMs"`
	P50FromLast Pair    `json:"p50FromLastWriteMs"`
	PeakRSS     Pair    `json:"peakRssMiB"`
	CPU         Pair    `json:"cpuSeconds"`
	// Guards are the scenario's guardrail figures (S18's rollouts per workload, S19's
	// failure spread), each side's own figure, not a ratio.
	Guards []GuardFigure `json:"guards,omitempty"`
}

// GuardFigure is one guardrail figure of both sides.
type GuardFigure struct {
	Name string `json:"name"`
	Pair
	// OldVerdict and NewVerdict are the figure's gate, where it has one.
	OldVerdict string `json:"oldVerdict,omitempty"`
	NewVerdict string `json:"newVerdict,omitempty"`
}

// Sides is "old 31, new 4" (with a verdict where the figure is gated: "old 31 FAIL").
func (g GuardFigure) Sides() string {
	side := func(name string, v *float64, verdict string) string {
		if v == nil {
			return name + " -"
		}
		out := name + " " + format(v)
		if verdict == "FAIL" || verdict == "WARN" {
			out += " " + verdict
		}
		return out
	}
	return side("old", g.Old, g.OldVerdict) + ", " + side("new", g.New, g.NewVerdict)
}

// SummaryHeader names the summary's figure columns, in the order of SummaryRow.Figures.
var SummaryHeader = []string{"rollouts", "API requests", "API writes", "p50 from each write", "p50 from last write", "peak RSS", "CPU"}

// Figures are the row's pairs in SummaryHeader's order.
func (s SummaryRow) Figures() []Pair {
	return []Pair{s.Rollouts, s.APIRequests, s.APIWrites, s.P50FromEach, s.P50FromLast, s.PeakRSS, s.CPU}
}

// Summary is one row per scenario, from the figures of its detailed rows.
func (rep Report) Summary() []SummaryRow {
	var out []SummaryRow
	for _, s := range rep.Sections {
		pair := func(metric string) Pair {
			for _, r := range s.Rows {
				if r.Metric == metric || strings.HasPrefix(r.Metric, metric+" (") {
					return Pair{Old: r.Old, New: r.New}
				}
			}
			return Pair{}
		}
		row := SummaryRow{Scenario: s.Scenario, New: s.NewVerdict, Old: s.OldVerdict,
			Rollouts: pair(RowReloads), APIRequests: pair(RowAPIRequests), APIWrites: pair(RowAPIWrites),
			P50FromEach: pair(RowP50FromEach), P50FromLast: pair(RowP50FromLast), PeakRSS: pair(RowPeakRSS), CPU: pair(RowCPU)}
		for _, r := range s.Rows {
			if r.Guard {
				row.Guards = append(row.Guards, GuardFigure{Name: strings.TrimPrefix(r.Metric, "check: "), Pair: Pair{Old: r.Old, New: r.New},
					OldVerdict: r.OldVerdict, NewVerdict: r.NewVerdict})
			}
		}
		out = append(out, row)
	}
	return out
}

// bothSides reports whether any scenario ran on both sides, so the figures are ratios.
func (rep Report) bothSides() bool {
	for _, s := range rep.Sections {
		if s.Old != nil && s.New != nil {
			return true
		}
	}
	return false
}

// summaryNote says what the verdicts and figures of the summary mean.
func (rep Report) summaryNote() string {
	note := fmt.Sprintf("The %s build's verdict decides the overall verdict and exit code", rep.Judged)
	if rep.Judged == "new" {
		note += "; the old build's failures are shown, never counted"
	}
	if rep.bothSides() {
		return note + ". Figures are new/old ratios (below 1: new does less or is faster)."
	}
	return note + ". Figures are the one side's."
}

// overall is the report's last line: the judged build's verdict, and the other's failures.
func (rep Report) overall() string {
	line := fmt.Sprintf("OVERALL: %s (%s build)", verdict(rep.Pass), rep.Judged)
	if rep.Judged != "new" {
		return line
	}
	var oldFailed []string
	for _, s := range rep.Sections {
		if s.OldVerdict.Ran && !s.OldVerdict.Pass {
			oldFailed = append(oldFailed, s.Scenario+" ("+strings.Join(s.OldVerdict.Failed, ", ")+")")
		}
	}
	if len(oldFailed) > 0 {
		line += "; old build: FAIL in " + strings.Join(oldFailed, "; ")
	}
	return line
}

// summaryText writes the summary table.
func (rep Report) summaryText(w io.Writer) {
	fmt.Fprintf(w, "SUMMARY: %s. %s\n", verdict(rep.Pass), rep.summaryNote())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "scenario\tnew\told\t%s\t\n", strings.Join(SummaryHeader, "\t"))
	for _, s := range rep.Summary() {
		cells := []string{s.Scenario, s.New.String(), s.Old.String()}
		for _, p := range s.Figures() {
			cells = append(cells, p.Ratio())
		}
		fmt.Fprintf(tw, "%s\t\n", strings.Join(cells, "\t"))
	}
	_ = tw.Flush()
	for _, line := range rep.guardLines() {
		fmt.Fprintln(w, line)
	}
}

// guardLines are guardFigures under a heading; none when no scenario has them.
func (rep Report) guardLines() []string {
	out := rep.guardFigures()
	if len(out) > 0 {
		out = append([]string{"Guardrails (each side's own figures):"}, out...)
	}
	return out
}

// guardFigures quote the guardrail scenarios' figures, each side's own: their rollouts and
// API writes, then each guardrail figure ("S18 rollouts per workload ...: old 31 FAIL, new 4").
func (rep Report) guardFigures() []string {
	var out []string
	for _, s := range rep.Summary() {
		if len(s.Guards) == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("%s rollouts (template changes, all workloads): %s; API writes: %s", s.Scenario,
			GuardFigure{Pair: s.Rollouts}.Sides(), GuardFigure{Pair: s.APIWrites}.Sides()))
		for _, g := range s.Guards {
			out = append(out, fmt.Sprintf("%s %s: %s", s.Scenario, g.Name, g.Sides()))
		}
	}
	return out
}
