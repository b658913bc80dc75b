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

func rows(old, nu *Result, g Gates) []Row {
	// opt reads a figure a side may lack (a metric its binary does not expose).
	opt := func(r *Result, f func(*Result) *float64) *float64 {
		if r == nil || r.Error != "" {
			return nil
		}
		return f(r)
	}
	val := func(r *Result, f func(*Result) float64) *float64 {
		return opt(r, func(r *Result) *float64 { v := f(r); return &v })
	}
	// level is a side's verdict where it has a figure.
	level := func(v *float64, fail, warn bool) string {
		switch {
		case v == nil:
			return ""
		case fail:
			return "FAIL"
		case warn:
			return "WARN"
		}
		return "pass"
	}
	var out []Row
	// atMost gates each side on its own, with no WARN.
	atMost := func(metric, short string, limit float64, f func(*Result) *float64) {
		row := Row{Metric: metric, short: short, Old: opt(old, f), New: opt(nu, f), Expected: fmt.Sprintf("≤ %g", limit)}
		row.OldVerdict = level(row.Old, row.Old != nil && *row.Old > limit, false)
		row.NewVerdict = level(row.New, row.New != nil && *row.New > limit, false)
		out = append(out, row)
	}
	count := func(f func(*Result) int) func(*Result) *float64 {
		return func(r *Result) *float64 { v := float64(f(r)); return &v }
	}
	// bounded gates each side against the other: new may be ratio times old plus slack, and
	// so may old against new, so a build far behind the other fails whichever side it is on.
	// With one side, or a figure one side lacks, it is only shown.
	bounded := func(metric, short, unit string, ratio, slack float64, f func(*Result) *float64) {
		row := Row{Metric: metric, short: short, Old: opt(old, f), New: opt(nu, f), unit: unit}
		if row.Old != nil && row.New != nil {
			row.Expected = fmt.Sprintf("≤ other×%g + %g", ratio, slack)
			judge := func(v, other float64) string {
				limit := other*ratio + slack
				return level(&v, v > limit, v > other+g.WarnAt*(limit-other))
			}
			row.OldVerdict, row.NewVerdict = judge(*row.Old, *row.New), judge(*row.New, *row.Old)
		}
		out = append(out, row)
	}
	info := func(metric, unit string, f func(*Result) *float64) {
		out = append(out, Row{Metric: metric, Old: opt(old, f), New: opt(nu, f), unit: unit})
	}
	plain := func(f func(*Result) float64) func(*Result) *float64 {
		return func(r *Result) *float64 { v := f(r); return &v }
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
	atMost("missed reloads", "missed", float64(g.MaxMissed), count(func(r *Result) int { return r.Missed }))
	atMost("duplicate reloads", "duplicates", float64(g.MaxDuplicates), count(func(r *Result) int { return r.Duplicates }))
	atMost("unexpected reloads", "unexpected", float64(g.MaxUnexpected), count(func(r *Result) int { return r.Unexpected }))
	for _, name := range checkNames(old, nu) {
		f := func(r *Result) *float64 {
			for _, c := range r.Checks {
				if c.Name == name {
					v := c.Value
					return &v
				}
			}
			return nil
		}
		if lim := checkMax(old, nu, name); lim != nil {
			atMost("check: "+name, name, *lim, f)
		} else {
			info("check: "+name, "", f)
		}
	}
	info(RowReloadsPerSecond, "/s", plain(func(r *Result) float64 { return r.ReloadsPerSecond }))
	info("seconds from the end of the load to its last rollout", "s", plain(func(r *Result) float64 { return r.SettleSeconds }))
	// Latency is gated from the last write each rollout covered, which judges a build that
	// coalesces writes and one that rolls for each alike; from each write is shown beside it.
	fromLast := func(q func(Latency) float64) func(*Result) *float64 {
		return plain(func(r *Result) float64 { return q(r.LatencyFromLastWrite) })
	}
	bounded(RowP50FromLast, "p50 from last write", "ms", g.LatencyRatio, g.LatencySlackMs, fromLast(func(l Latency) float64 { return l.P50 }))
	bounded("latency p95 from last write covered (ms)", "p95 from last write", "ms", g.LatencyRatio, g.LatencySlackMs, fromLast(func(l Latency) float64 { return l.P95 }))
	bounded(RowP99FromLast, "p99 from last write", "ms", g.P99Ratio, g.P99SlackMs, fromLast(func(l Latency) float64 { return l.P99 }))
	info(RowP50FromEach, "ms", plain(func(r *Result) float64 { return r.Latency.P50 }))
	info("latency p95 from each write (ms)", "ms", plain(func(r *Result) float64 { return r.Latency.P95 }))
	info("latency p99 from each write (ms)", "ms", plain(func(r *Result) float64 { return r.Latency.P99 }))
	hasAPI := (old == nil || old.API != nil) && (nu == nil || nu.API != nil)
	if hasAPI {
		audited := (old == nil || old.API.Source == "") && (nu == nil || nu.API.Source == "")
		src := ""
		if !audited {
			src = " (client metrics)"
		}
		bounded(RowAPIRequests+src, "API requests", "", g.APIRatio, float64(g.APISlack), count(func(r *Result) int { return r.API.Total }))
		bounded(RowAPIWrites+src, "API writes", "", g.APIRatio, float64(g.APISlack), count(func(r *Result) int { return r.API.Writes }))
		if audited {
			bounded("API LISTs", "LISTs", "", g.ListRatio, g.ListSlack, count(func(r *Result) int { return r.API.Lists }))
		}
		for _, verb := range apiVerbs(old, nu) {
			info("API "+verb+src, "", count(func(r *Result) int { return r.API.ByVerb[verb] }))
		}
		info("API 409 conflicts", "", count(func(r *Result) int { return r.API.Conflicts }))
		if audited {
			info("idle req/s after load", "req/s", plain(func(r *Result) float64 { return r.IdleRPSAfter }))
			row := Row{Metric: "repeated req/s after load (hot loop)", short: "hot loop", unit: "req/s",
				Old: val(old, func(r *Result) float64 { return r.RepeatRPSAfter }), New: val(nu, func(r *Result) float64 { return r.RepeatRPSAfter }),
				Expected: fmt.Sprintf("≤ before load + %g", g.MaxIdleRPSIncrease)}
			hot := func(r *Result, v *float64) string {
				if v == nil {
					return ""
				}
				return level(v, r.RepeatRPSAfter > r.RepeatRPSBefore+g.MaxIdleRPSIncrease, r.RepeatRPSAfter > r.RepeatRPSBefore+g.WarnAt*g.MaxIdleRPSIncrease)
			}
			row.OldVerdict, row.NewVerdict = hot(old, row.Old), hot(nu, row.New)
			out = append(out, row)
		}
	}
	// The design's hot-loop check on the controller's own reconcile rate.
	back := func(r *Result) *float64 {
		switch {
		case r.Runtime.ReconcileNotBack:
			v := ReconcileReturnWindow.Seconds()
			return &v
		}
		return r.Runtime.ReconcileReturnSeconds
	}
	row := Row{Metric: "seconds until reconciles/s is back at its rate before the load", short: "reconcile rate back after", unit: "s",
		Old: opt(old, back), New: opt(nu, back), Expected: fmt.Sprintf("≤ %g", g.MaxReconcileReturnSeconds)}
	for _, side := range []struct {
		r       *Result
		v       *float64
		verdict *string
	}{{old, row.Old, &row.OldVerdict}, {nu, row.New, &row.NewVerdict}} {
		if side.v != nil {
			*side.verdict = level(side.v, side.r.Runtime.ReconcileNotBack || *side.v > g.MaxReconcileReturnSeconds, *side.v > g.WarnAt*g.MaxReconcileReturnSeconds)
		}
	}
	out = append(out, row)
	rt := func(f func(Runtime) *float64) func(*Result) *float64 {
		return func(r *Result) *float64 { return f(r.Runtime) }
	}
	info("reconciles/s before the load", "/s", rt(func(x Runtime) *float64 { return x.ReconcileBaseline }))
	info("reconciles", "", rt(func(x Runtime) *float64 { return x.Reconciles }))
	info(RowReconcilesPerSecond, "/s", rt(func(x Runtime) *float64 { return x.ReconcilesPerSecond }))
	info("reconciles/s peak (5 s)", "/s", rt(func(x Runtime) *float64 { return x.ReconcilesPerSecondPeak }))
	info("work-queue depth peak", "", rt(func(x Runtime) *float64 { return x.QueueDepthPeak }))
	bounded(RowErrors, "errors", "", g.ErrorRatio, g.ErrorSlack, rt(func(x Runtime) *float64 { return x.Errors }))
	info("requeues after an error (reloader_retries_total)", "", rt(func(x Runtime) *float64 {
		if v, ok := x.Counters["reloader_retries_total"]; ok {
			return &v
		}
		return nil
	}))
	info("workloads scanned", "", rt(func(x Runtime) *float64 { return x.WorkloadsScanned }))
	info("workloads matched", "", rt(func(x Runtime) *float64 { return x.WorkloadsMatched }))
	hist := func(name string, f func(Runtime) *Latency) {
		for _, q := range []struct {
			name string
			get  func(Latency) float64
		}{{"p50", func(l Latency) float64 { return l.P50 }}, {"p95", func(l Latency) float64 { return l.P95 }}, {"p99", func(l Latency) float64 { return l.P99 }}} {
			info(name+" "+q.name+" (ms)", "ms", func(r *Result) *float64 {
				l := f(r.Runtime)
				if l == nil {
					return nil
				}
				v := q.get(*l)
				return &v
			})
		}
	}
	hist("reconcile duration", func(x Runtime) *Latency { return x.ReconcileDurationMs })
	hist("action latency", func(x Runtime) *Latency { return x.ActionLatencyMs })
	bounded(RowCPU, "CPU seconds", "s", g.CPURatio, g.CPUSlackSeconds, plain(func(r *Result) float64 { return r.CPUSeconds }))
	info("CPU cores, average", "", plain(func(r *Result) float64 { return r.Usage.CPUAvgCores }))
	info("CPU cores, steady state", "", plain(func(r *Result) float64 { return r.Usage.CPUSteadyCores }))
	info("CPU cores, peak (5 s)", "", plain(func(r *Result) float64 { return r.Usage.CPUPeakCores }))
	bounded(RowPeakRSS, "peak RSS", "MiB", g.MemoryRatio, g.MemorySlackMiB, plain(func(r *Result) float64 { return r.PeakRSSMiB }))
	info("RSS average (MiB)", "MiB", plain(func(r *Result) float64 { return r.Usage.RSSAvgMiB }))
	info("RSS steady state (MiB)", "MiB", plain(func(r *Result) float64 { return r.Usage.RSSSteadyMiB }))
	info("heap steady state (MiB)", "MiB", rt(func(x Runtime) *float64 { return x.HeapSteadyMiB }))
	info("heap peak (MiB)", "MiB", rt(func(x Runtime) *float64 { return x.HeapPeakMiB }))
	info("goroutines steady state", "", rt(func(x Runtime) *float64 { return x.GoroutinesSteady }))
	info("goroutines peak", "", rt(func(x Runtime) *float64 { return x.GoroutinesPeak }))
	info("GC pause max (ms, bounds the p99)", "ms", rt(func(x Runtime) *float64 { return x.GCPauseMaxMs }))
	if (old != nil && old.Faults != nil) || (nu != nil && nu.Faults != nil) {
		ft := func(f func(FaultResult) float64) func(*Result) *float64 {
			return func(r *Result) *float64 {
				if r.Faults == nil {
					return nil
				}
				v := f(*r.Faults)
				return &v
			}
		}
		info("faults: seconds on", "s", ft(func(x FaultResult) float64 { return x.Seconds }))
		info("faults: requests through the proxy", "", ft(func(x FaultResult) float64 { return float64(x.Proxy.Requests) }))
		info("faults: 429 injected (Retry-After)", "", ft(func(x FaultResult) float64 { return float64(x.Proxy.TooManyRequests) }))
		info("faults: 500/503 injected", "", ft(func(x FaultResult) float64 { return float64(x.Proxy.ServerErrors) }))
		info("faults: 429 over the QPS limit", "", ft(func(x FaultResult) float64 { return float64(x.Proxy.Throttled) }))
		info("faults: requests delayed", "", ft(func(x FaultResult) float64 { return float64(x.Proxy.Delayed) }))
		info("faults: watch streams cut", "", ft(func(x FaultResult) float64 { return float64(x.Proxy.WatchesDropped) }))
		info("faults: retries (same request again)", "", ft(func(x FaultResult) float64 { return float64(x.Proxy.Retries) }))
		info("faults: 429/5xx counted by the controller's client", "", func(r *Result) *float64 {
			if r.Faults == nil {
				return nil
			}
			return r.Faults.ClientErrors
		})
	}
	return out
}

// checkNames lists the checks either side ran, in order.
func checkNames(rs ...*Result) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range rs {
		if r == nil {
			continue
		}
		for _, c := range r.Checks {
			if !seen[c.Name] {
				seen[c.Name] = true
				out = append(out, c.Name)
			}
		}
	}
	return out
}

func checkMax(old, nu *Result, name string) *float64 {
	for _, r := range []*Result{old, nu} {
		if r == nil {
			continue
		}
		for _, c := range r.Checks {
			if c.Name == name && c.Max != nil {
				return c.Max
			}
		}
	}
	return nil
}

// apiVerbs lists the verbs either side used, in a fixed order.
func apiVerbs(rs ...*Result) []string {
	set := map[string]bool{}
	for _, r := range rs {
		if r != nil && r.API != nil {
			for v := range r.API.ByVerb {
				set[v] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	sort.Strings(out)
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
	RowP99FromLast = "latency p99 from last write covered (ms)"
	RowCPU         = "CPU seconds"
	RowErrors      = "errors (reloader_errors_total)"

	RowReloadsPerSecond    = "rollouts/s (first write to last rollout)"
	RowReconcilesPerSecond = "reconciles/s during the load"
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
