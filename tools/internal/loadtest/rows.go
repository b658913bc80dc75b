package loadtest

import (
	"fmt"
	"sort"
)

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

// figureKind says how a gated figure compares between a side that missed reloads and one
// that did not: see bounded in rows.
type figureKind int

const (
	total         figureKind = iota // grows with the work done: requests, CPU, errors
	levelFigure                     // a level whatever the work: memory
	latencyFigure                   // measured on rollouts: none where nothing rolled
)

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
	// within gates each side on its own between a row's bounds, with no WARN.
	within := func(row Row, lo, hi *float64) {
		out0 := func(v *float64) string {
			return level(v, v != nil && ((lo != nil && *v < *lo) || (hi != nil && *v > *hi)), false)
		}
		row.OldVerdict, row.NewVerdict = out0(row.Old), out0(row.New)
		out = append(out, row)
	}
	checkRow := func(metric, short string, lo, hi *float64, f func(*Result) *float64) (Row, *float64, *float64) {
		row := Row{Metric: metric, short: short, Old: opt(old, f), New: opt(nu, f)}
		switch {
		case lo != nil && hi != nil && *lo == *hi:
			row.Expected = fmt.Sprintf("= %g", *lo)
		case lo != nil && hi != nil:
			row.Expected = fmt.Sprintf("%g..%g", *lo, *hi)
		case lo != nil:
			row.Expected = fmt.Sprintf("≥ %g", *lo)
		default:
			row.Expected = fmt.Sprintf("≤ %g", *hi)
		}
		return row, lo, hi
	}
	count := func(f func(*Result) int) func(*Result) *float64 {
		return func(r *Result) *float64 { v := float64(f(r)); return &v }
	}
	// missedWork: a side that missed reloads did less of the scenario's work than was asked,
	// so its costs and latencies are no yardstick for the other side (a side that reloaded
	// nothing has no latency at all).
	missedWork := func(r *Result) bool { return r != nil && r.Error == "" && r.Missed > g.MaxMissed }
	// bounded gates each side against the other: new may be ratio times old plus slack, and
	// so may old against new, so a build far behind the other fails whichever side it is on.
	// With one side, or a figure one side lacks, it is only shown. A verdict never switches
	// off against a side that missed reloads; the row says how it was judged instead:
	// a total (requests, CPU, errors) is judged per workload followed (brought to its last
	// content: the workloads booked less those missed), each side's figure over its own, the
	// slack spread over the workloads booked, since the totals compare unequal work (per
	// rollout would fault a build for coalescing writes into fewer rollouts); a level (memory)
	// is judged as it is; a latency too, or, where a side has none to compare (it rolled
	// nothing), by the absolute bound ratio×slack.
	bounded := func(metric, short, unit string, ratio, slack float64, f func(*Result) *float64, kind figureKind) {
		row := Row{Metric: metric, short: short, Old: opt(old, f), New: opt(nu, f), unit: unit}
		if row.Old == nil || row.New == nil {
			out = append(out, row)
			return
		}
		judge := func(v, other, slack float64) string {
			limit := other*ratio + slack
			return level(&v, v > limit, v > other+g.WarnAt*(limit-other))
		}
		o, n := *row.Old, *row.New
		row.Expected = fmt.Sprintf("≤ other×%g + %g", ratio, slack)
		switch {
		case !missedWork(old) && !missedWork(nu):
			row.OldVerdict, row.NewVerdict = judge(o, n, slack), judge(n, o, slack)
		case kind == total && followed(old) > 0 && followed(nu) > 0:
			booked := float64(max(old.ExpectedMin, nu.ExpectedMin, 1))
			op, np, ps := o/float64(followed(old)), n/float64(followed(nu)), slack/booked
			row.OldVerdict, row.NewVerdict = judge(op, np, ps), judge(np, op, ps)
			row.Expected = fmt.Sprintf("per workload followed ≤ other×%g + %.3g (a side missed; %.3g old, %.3g new)", ratio, ps, op, np)
		case kind == total:
			// A side that followed no workload may not spend more than the one that did the
			// work; the work has no yardstick in a side that did none: said in the row.
			idle, busy := &row.OldVerdict, &row.NewVerdict
			iv, bv := o, n
			if followed(nu) == 0 {
				idle, busy, iv, bv = busy, idle, bv, iv
			}
			*idle = judge(iv, bv, slack)
			*busy = ""
			row.Expected += " (a side followed no workload: only it is judged, on its totals)"
		case kind == levelFigure || (old.Reloads > 0 && nu.Reloads > 0):
			// Memory, and latencies of two sides that both rolled.
			row.OldVerdict, row.NewVerdict = judge(o, n, slack), judge(n, o, slack)
			row.Expected += " (a side missed: judged as measured)"
		default:
			abs := ratio * slack
			row.OldVerdict, row.NewVerdict = judge(o, 0, abs), judge(n, 0, abs)
			row.Expected = fmt.Sprintf("≤ %g (a side rolled nothing: absolute bound)", abs)
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
		if lo, hi := checkBounds(old, nu, name); lo != nil || hi != nil {
			within(checkRow("check: "+name, name, lo, hi, f))
		} else {
			info("check: "+name, "", f)
		}
		out[len(out)-1].Guard = checkSummary(old, nu, name)
	}
	info(RowReloadsPerSecond, "/s", plain(func(r *Result) float64 { return r.ReloadsPerSecond }))
	info("seconds from the end of the load to its last rollout", "s", plain(func(r *Result) float64 { return r.SettleSeconds }))
	// Latency is gated from the last write each rollout covered, which judges a build that
	// coalesces writes and one that rolls for each alike; from each write is shown beside it.
	fromLast := func(q func(Latency) float64) func(*Result) *float64 {
		return plain(func(r *Result) float64 { return q(r.LatencyFromLastWrite) })
	}
	latency := bounded
	if why := holds(old, nu); why != "" {
		// A guardrail holds reloads on purpose: a build that has it is slow by design there.
		out = append(out, Row{Metric: "latency not gated: " + why})
		latency = func(metric, _, unit string, _, _ float64, f func(*Result) *float64, _ figureKind) {
			out = append(out, Row{Metric: metric, Old: opt(old, f), New: opt(nu, f), unit: unit, Expected: "not gated"})
		}
	}
	latency(RowP50FromLast, "p50 from last write", "ms", g.LatencyRatio, g.LatencySlackMs, fromLast(func(l Latency) float64 { return l.P50 }), latencyFigure)
	latency("latency p95 from last write covered (ms)", "p95 from last write", "ms", g.LatencyRatio, g.LatencySlackMs, fromLast(func(l Latency) float64 { return l.P95 }), latencyFigure)
	latency(RowP99FromLast, "p99 from last write", "ms", g.P99Ratio, g.P99SlackMs, fromLast(func(l Latency) float64 { return l.P99 }), latencyFigure)
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
		bounded(RowAPIRequests+src, "API requests", "", g.APIRatio, float64(g.APISlack), count(func(r *Result) int { return r.API.Total }), total)
		bounded(RowAPIWrites+src, "API writes", "", g.APIRatio, float64(g.APISlack), count(func(r *Result) int { return r.API.Writes }), total)
		if audited {
			// client-go's informers list through watch lists (a watch with
			// sendInitialEvents=true): both bring a whole collection, and both count here.
			bounded("API LISTs and watch lists", "LISTs", "", g.ListRatio, g.ListSlack, count(func(r *Result) int { return r.API.ListEquivalents() }), total)
			info("API LIST requests", "", count(func(r *Result) int { return r.API.Lists }))
			info("API watch lists (sendInitialEvents=true)", "", count(func(r *Result) int { return r.API.WatchLists }))
		}
		for _, verb := range apiVerbs(old, nu) {
			info("API "+verb+src, "", count(func(r *Result) int { return r.API.ByVerb[verb] }))
		}
		info("API 409 conflicts", "", count(func(r *Result) int { return r.API.Conflicts }))
		if (old == nil || old.APIStartup != nil) && (nu == nil || nu.APIStartup != nil) {
			info("API requests at start-up (before the load)", "", count(func(r *Result) int { return r.APIStartup.Total }))
			info("API writes at start-up (before the load)", "", count(func(r *Result) int { return r.APIStartup.Writes }))
		}
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
	if (old != nil && old.Faults != nil) || (nu != nil && nu.Faults != nil) {
		// Injected faults make errors, as many as chance gives each side: shown, not judged.
		info(RowErrors+", faults injected: not gated", "", rt(func(x Runtime) *float64 { return x.Errors }))
	} else {
		bounded(RowErrors, "errors", "", g.ErrorRatio, g.ErrorSlack, rt(func(x Runtime) *float64 { return x.Errors }), total)
	}
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
	bounded(RowCPU, "CPU seconds", "s", g.CPURatio, g.CPUSlackSeconds, plain(func(r *Result) float64 { return r.CPUSeconds }), total)
	if (old == nil || old.Usage.CPUStartupSeconds != nil) && (nu == nil || nu.Usage.CPUStartupSeconds != nil) {
		info("CPU seconds at start-up (before the load)", "s", plain(func(r *Result) float64 { return *r.Usage.CPUStartupSeconds }))
	}
	info("CPU cores, average", "", plain(func(r *Result) float64 { return r.Usage.CPUAvgCores }))
	info("CPU cores, steady state", "", plain(func(r *Result) float64 { return r.Usage.CPUSteadyCores }))
	info("CPU cores, peak (5 s)", "", plain(func(r *Result) float64 { return r.Usage.CPUPeakCores }))
	bounded(RowPeakRSS, "peak RSS", "MiB", g.MemoryRatio, g.MemorySlackMiB, plain(func(r *Result) float64 { return r.PeakRSSMiB }), levelFigure)
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

// checkSummary reports whether either side marks the check's figure for the summary.
func checkSummary(old, nu *Result, name string) bool {
	for _, r := range []*Result{old, nu} {
		if r == nil {
			continue
		}
		for _, c := range r.Checks {
			if c.Name == name && c.Summary {
				return true
			}
		}
	}
	return false
}

// holds is why the scenario's reloads may be held on purpose (Result.Holds), "" when not.
func holds(old, nu *Result) string {
	for _, r := range []*Result{old, nu} {
		if r != nil && r.Holds != "" {
			return r.Holds
		}
	}
	return ""
}

// followed is the workloads a side brought to their last content: those booked less those it
// missed.
func followed(r *Result) int { return max(r.ExpectedMin-r.Missed, 0) }

// checkBounds is the gate of the check named name, from whichever side ran it: nil, nil for
// a figure only shown.
func checkBounds(old, nu *Result, name string) (lo, hi *float64) {
	for _, r := range []*Result{old, nu} {
		if r == nil {
			continue
		}
		for _, c := range r.Checks {
			if c.Name == name && (c.Max != nil || c.Min != nil) {
				return c.Min, c.Max
			}
		}
	}
	return nil, nil
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
