package loadtest

import (
	"fmt"
	"io"
	"strings"
)

// figuresVsUpstream, first in a figures marker's list, asks for VsUpstream's table instead
// of Figures': `<!-- figures:begin vs-upstream DIR [DIR...] -->`.
const figuresVsUpstream = "vs-upstream"

// vsFigure is one row of the vs-upstream table: a figure of one scenario, read from a side's
// result, and the target this build's figure has to meet against the last run's baseline
// (issue 35's "done means"); target nil: shown, not judged.
type vsFigure struct {
	scenario, name string
	cell           func(r *Result) string
	target         *vsTarget
}

// vsTarget judges this build's result (nu) against the baseline's of the same run (old).
// ok is false when the target is missed; known false when a side lacks the figure.
type vsTarget struct {
	text  string
	check func(nu, old *Result) (ok, known bool)
}

// loadCPU is the CPU a side spent from the start of the load to the end of the run.
func loadCPU(r *Result) (float64, bool) {
	if r.Usage.CPUStartupSeconds == nil {
		return 0, false
	}
	return r.CPUSeconds - *r.Usage.CPUStartupSeconds, true
}

// cpuPerRollout is loadCPU over the rollouts.
func cpuPerRollout(r *Result) (float64, bool) {
	cpu, ok := loadCPU(r)
	if !ok || r.Reloads == 0 {
		return 0, false
	}
	return cpu / float64(r.Reloads), true
}

func apiPerRollout(r *Result) (float64, bool) {
	if r.API == nil || r.Reloads == 0 {
		return 0, false
	}
	return float64(r.API.Total) / float64(r.Reloads), true
}

func conflicts(r *Result) (float64, bool) {
	if r.API == nil {
		return 0, false
	}
	return float64(r.API.Conflicts), true
}

func rssAfterSync(r *Result) (float64, bool) {
	if r.Usage.RSSStartupMiB == nil {
		return 0, false
	}
	return *r.Usage.RSSStartupMiB, true
}

func startupCPU(r *Result) (float64, bool) {
	if r.Usage.CPUStartupSeconds == nil {
		return 0, false
	}
	return *r.Usage.CPUStartupSeconds, true
}

// atMost is the target "this build's figure at most factor times the baseline's".
func atMost(text string, factor float64, get func(*Result) (float64, bool)) *vsTarget {
	return &vsTarget{text, func(nu, old *Result) (bool, bool) {
		n, ok1 := get(nu)
		o, ok2 := get(old)
		return n <= factor*o, ok1 && ok2
	}}
}

// bound is the target "this build's figure at most limit", whatever the baseline's.
func bound(text string, limit float64, get func(*Result) (float64, bool)) *vsTarget {
	return &vsTarget{text, func(nu, _ *Result) (bool, bool) {
		n, ok := get(nu)
		return n <= limit, ok
	}}
}

var noneMissed = &vsTarget{"0 missed, 0 duplicates", func(nu, _ *Result) (bool, bool) {
	return nu.Missed == 0 && nu.Duplicates == 0, true
}}

func missedCell(r *Result) string { return fmt.Sprintf("%d / %d", r.Missed, r.Duplicates) }

func conflictsCell(r *Result) string {
	if r.API == nil {
		return "-"
	}
	return groupDigits(fmt.Sprint(r.API.Conflicts))
}

func cpuCell(r *Result) string {
	cpu, ok := loadCPU(r)
	if !ok {
		return "-"
	}
	s := fmt.Sprintf("%.2f s for %s rollouts", cpu, groupDigits(fmt.Sprint(r.Reloads)))
	if per, ok := cpuPerRollout(r); ok {
		s += fmt.Sprintf(" (%.1f ms each)", per*1000)
	}
	return s
}

func rssCell(r *Result) string {
	after, ok := rssAfterSync(r)
	if !ok {
		return fmt.Sprintf("- / %.1f MiB", r.PeakRSSMiB)
	}
	return fmt.Sprintf("%.1f / %.1f MiB", after, r.PeakRSSMiB)
}

var vsFigures = []vsFigure{
	{"U1", "CPU during the load", cpuCell, atMost("per rollout at most the baseline's", 1, cpuPerRollout)},
	{"U1", "RSS after sync / peak", rssCell, atMost("after sync at most the baseline's", 1, rssAfterSync)},
	{"U1", "API requests per rollout", func(r *Result) string {
		if v, ok := apiPerRollout(r); ok {
			return fmt.Sprintf("%.2f", v)
		}
		return "-"
	}, bound("at most 1.3", 1.3, apiPerRollout)},
	{"U1", "409 conflicts", conflictsCell, bound("none", 0, conflicts)},
	{"U1", "missed / duplicates", missedCell, noneMissed},
	{"U2", "all changed after (p50 / slowest write)", func(r *Result) string {
		if len(r.Latency.Samples) == 0 && r.Latency.Max == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f / %.2f s", r.Latency.P50/1000, r.Latency.Max/1000)
	}, nil},
	{"U2", "CPU during the load", cpuCell, atMost("per rollout at most the baseline's", 1, cpuPerRollout)},
	{"U2", "409 conflicts", conflictsCell, bound("none", 0, conflicts)},
	{"U2", "missed / duplicates", missedCell, noneMissed},
	{"U3", "RSS after sync / peak", rssCell, atMost("after sync at most half the baseline's", 0.5, rssAfterSync)},
	{"U3", "CPU at start-up / during the writes", func(r *Result) string {
		st, ok1 := startupCPU(r)
		ld, ok2 := loadCPU(r)
		if !ok1 || !ok2 {
			return "-"
		}
		return fmt.Sprintf("%.2f / %.2f s", st, ld)
	}, atMost("start-up at most the baseline's", 1, startupCPU)},
	{"U3", "API writes at start-up / during the writes", func(r *Result) string {
		if r.API == nil {
			return "-"
		}
		start := "-"
		if r.APIStartup != nil {
			start = groupDigits(fmt.Sprint(r.APIStartup.Writes))
		}
		return start + " / " + groupDigits(fmt.Sprint(r.API.Writes))
	}, nil},
	{"U3", "missed / duplicates", missedCell, noneMissed},
	{"U4", "missed / duplicates", missedCell, noneMissed},
	{"U4", "409 conflicts", conflictsCell, bound("none", 0, conflicts)},
}

// sides finds a run's results of a scenario; nil where it has none or the side failed.
func (r FigureRun) sides(scenario string) (old, nu *Result) {
	for i := range r.Results {
		res := &r.Results[i]
		if res.Scenario != scenario || res.Error != "" {
			continue
		}
		if res.Side == "old" {
			old = res
		} else {
			nu = res
		}
	}
	return old, nu
}

// VsUpstream writes the vs-upstream table: a row per figure of the preset's scenarios, with,
// for each run (a baseline against this build, one results directory), the baseline's figure
// and this build's from the same run; the last column judges this build against the last
// run's baseline (issue 35's targets): "met", "**missed**", or "-" when a side lacks the figure.
func VsUpstream(w io.Writer, runs []FigureRun) {
	fmt.Fprintln(w, "Generated by `make figures` from the results committed in each directory (`make bench-vs-upstream` measures them); each baseline ran against this build in the same run, one side after the other.")
	fmt.Fprintln(w)
	for _, r := range runs {
		fmt.Fprintf(w, "- %s\n", r.line())
	}
	fmt.Fprintln(w)
	header := []string{"scenario", "figure"}
	for _, r := range runs {
		header = append(header, r.Label(), "this build (same run)")
	}
	last := "-"
	if len(runs) > 0 {
		last = runs[len(runs)-1].Label()
	}
	header = append(header, "target against "+last)
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(header, " | "), strings.Repeat("---|", len(header)))
	prev := ""
	for _, f := range vsFigures {
		scenario := ""
		if f.scenario != prev {
			scenario = strings.TrimSpace(f.scenario + " " + strings.SplitN(Scenarios[f.scenario].Title, ":", 2)[0])
			prev = f.scenario
		}
		row := []string{mdCell(scenario), mdCell(f.name)}
		var old, nu *Result
		for _, r := range runs {
			old, nu = r.sides(f.scenario)
			row = append(row, vsCell(f, old), vsCell(f, nu))
		}
		row = append(row, mdCell(vsVerdict(f.target, nu, old)))
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
}

func vsCell(f vsFigure, r *Result) string {
	if r == nil {
		return "-"
	}
	return mdCell(f.cell(r))
}

// vsVerdict is a target's verdict: "" for a figure without one.
func vsVerdict(t *vsTarget, nu, old *Result) string {
	switch {
	case t == nil:
		return ""
	case nu == nil || old == nil:
		return "- (" + t.text + ")"
	}
	ok, known := t.check(nu, old)
	switch {
	case !known:
		return "- (" + t.text + ")"
	case ok:
		return "met (" + t.text + ")"
	}
	return "**missed** (" + t.text + ")"
}
