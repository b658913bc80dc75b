package loadtest

import (
	"math"
	"sort"
	"time"

	"github.com/reloader-operator/reloader/tools/internal/loadtest/faults"
)

// Result is one side's run of one scenario.
type Result struct {
	Scenario string `json:"scenario"`
	Title    string `json:"title"`
	Side     string `json:"side"`
	Binary   string `json:"binary"`
	// Build identifies the binary and how it ran, so the run can be repeated.
	Build BuildInfo `json:"build"`
	// Scale and DurationSeconds are the run's Params (0 s: each scenario's design duration).
	Scale           float64 `json:"scale"`
	DurationSeconds float64 `json:"durationSeconds"`
	// Cores is the machine's CPU count; GOMAXPROCS is not set for the controller.
	Cores int `json:"cores"`
	// LoadAvg is the machine's 1-minute load average (/proc/loadavg) when the side's run of
	// the scenario started and when it ended: how busy the machine was besides; absent where
	// /proc/loadavg cannot be read.
	LoadAvg []float64 `json:"loadAvg,omitempty"`

	Workloads int `json:"workloads"`
	Writes    int `json:"writes"`
	// ExpectedMin and ExpectedMax bound the reloads: each workload with writes reloads at
	// least once and at most once per write.
	ExpectedMin int `json:"expectedMin"`
	ExpectedMax int `json:"expectedMax"`
	Reloads     int `json:"reloads"`
	// Missed counts workloads whose template never changed after the last write concerning
	// them, or ended on a template seen before that write began (stale content: see judge).
	Missed int `json:"missed"`
	// Duplicates counts rollouts that carried no new content (the template changed only in
	// time-like values, see TemplateSignature), or, where more, template changes beyond one
	// per write.
	Duplicates int `json:"duplicates"`
	// Unexpected counts template changes of workloads no write concerned.
	Unexpected int      `json:"unexpected"`
	Examples   []string `json:"examples,omitempty"`

	// Latency is from each write to the first rollout after it: a rollout that covers ten
	// writes counts ten times, so coalescing writes looks slow here.
	Latency Latency `json:"latency"`
	// LatencyFromLastWrite is, for each rollout, the time from the newest write it covered:
	// one sample per rollout that covered a write, comparable between a build that coalesces
	// writes and one that rolls for each.
	LatencyFromLastWrite Latency `json:"latencyFromLastWrite"`
	// API counts the side's requests: from the audit log on a local control plane, from the
	// controller's own client metrics (rest_client_requests_total) on an existing cluster;
	// nil when neither was available.
	// With the audit log, API holds the requests from the start of the load to the end of the
	// run (what the API gates judge) and APIStartup those before the load: start-up, from the
	// controller's start until its requests settled.
	API        *API `json:"api,omitempty"`
	APIStartup *API `json:"apiStartup,omitempty"`
	// IdleRPSBefore and IdleRPSAfter are the request rates (watches aside) before the load
	// and in the 5 s after it settled; RepeatRPSBefore and RepeatRPSAfter count only the
	// requests on an object asked for more than once in the window, the sign of a hot loop.
	IdleRPSBefore   float64 `json:"idleRpsBefore"`
	IdleRPSAfter    float64 `json:"idleRpsAfter"`
	RepeatRPSBefore float64 `json:"repeatRpsBefore"`
	RepeatRPSAfter  float64 `json:"repeatRpsAfter"`
	CPUSeconds      float64 `json:"cpuSeconds"`
	PeakRSSMiB      float64 `json:"peakRssMiB"`
	// Usage is the process from /proc, sampled every second; Runtime its /metrics, scraped
	// every two seconds and added up over restarts.
	Usage   Usage   `json:"usage"`
	Runtime Runtime `json:"runtime"`
	// ReloadsPerSecond is the rollouts over the span from the first write to the last rollout.
	ReloadsPerSecond float64 `json:"reloadsPerSecond"`
	// SettleSeconds is from the end of the load to the last rollout it asked for (after API
	// faults: the time to recover); NotSettled when the wait for it timed out.
	SettleSeconds float64 `json:"settleSeconds"`
	NotSettled    bool    `json:"notSettled,omitempty"`
	// Faults is what the fault proxy did, when the scenario had one.
	Faults *FaultResult `json:"faults,omitempty"`
	// Checks are the scenario's checks of the cluster after the load, and the figures it
	// measured while it ran (Driver.Figure).
	Checks []CheckFigure `json:"checks,omitempty"`
	// Holds is the scenario's Spec.Holds: why its latencies are not gated.
	Holds string `json:"holds,omitempty"`

	Seconds float64 `json:"seconds"`
	Error   string  `json:"error,omitempty"`
}

// BuildInfo is one side's binary and arguments.
type BuildInfo struct {
	// Version is the first line the binary printed for --version ("" if it has none).
	Version string   `json:"version"`
	SHA256  string   `json:"sha256"`
	Args    []string `json:"args"`
}

// FaultResult is a scenario's API faults and how the side coped.
type FaultResult struct {
	Config faults.Config `json:"config"`
	Proxy  faults.Stats  `json:"proxy"`
	// Seconds the faults were on.
	Seconds float64 `json:"seconds"`
	// ClientErrors are the 429 and 5xx answers the controller's client counted
	// (rest_client_requests_total), when it exposes them.
	ClientErrors *float64 `json:"clientErrors,omitempty"`
}

// Latency is a distribution of delays, in milliseconds.
type Latency struct {
	P50     float64   `json:"p50"`
	P95     float64   `json:"p95"`
	P99     float64   `json:"p99"`
	Max     float64   `json:"max"`
	Samples []float64 `json:"samples,omitempty"`
}

// ContentTrace is what the content checks of judge read: the content each booked write left
// (Driver.ContentLog) and each workload's template signatures (Observer.Signatures).
type ContentTrace struct {
	Writes map[string][]ContentWrite
	First  map[string]string
	After  map[string][]string
}

// judge compares the observed template changes with the writes each workload had to follow.
//
// A write is matched to the first template change at or after its start; a change covers the
// writes matched to it, those started after the change before it. That is the most a change
// can include, so a build whose patch lags a later write is credited with that write: the
// latency from the last write covered errs in favour of builds that roll once per write, never
// of builds that coalesce.
//
// With a trace (nil: timing only), two checks read content, and need no knowledge of how a
// build writes it:
//   - missed: a workload whose final template has the signature of one it had before its
//     last write began (when first seen, or after a rollout before) ended on content older
//     than the last, however many rollouts it made. Checked where the last write of each of
//     its sources left content none of its earlier writes had: after A, B, A the right
//     template may be one seen before.
//   - duplicates: a rollout whose template has the signature of the one before it carried no
//     content, whatever writes it followed. Rollouts are not attributed to writes by time:
//     a build that rolls for each write may patch for one write after the next began.
func judge(r *Result, writes map[string][]time.Time, tracked map[string]bool, changes map[string][]time.Time, trace *ContentTrace) {
	var samples, fromLast []float64
	example := func(s string) {
		if len(r.Examples) < 10 {
			r.Examples = append(r.Examples, s)
		}
	}
	r.Workloads = len(tracked)
	for w := range tracked {
		ws, cs := writes[w], changes[w]
		if len(ws) == 0 {
			if len(cs) > 0 {
				r.Unexpected += len(cs)
				example("unexpected: " + w)
			}
			continue
		}
		r.Writes += len(ws)
		r.ExpectedMin++
		r.ExpectedMax += len(ws)
		r.Reloads += len(cs)
		last := ws[len(ws)-1]
		for _, t := range ws {
			last = maxTime(last, t)
		}
		switch {
		case len(cs) == 0 || cs[len(cs)-1].Before(last):
			r.Missed++
			example("missed: " + w)
		case trace != nil && staleEnd(w, cs, last, trace):
			r.Missed++
			example("missed (ended on older content): " + w)
		}
		dups := max(len(cs)-len(ws), 0)
		if trace != nil {
			dups = max(dups, noContent(w, trace))
		}
		if dups > 0 {
			r.Duplicates += dups
			example("duplicate: " + w)
		}
		newest := make([]time.Time, len(cs)) // per change, the newest write it covers
		for _, t := range ws {
			i := sort.Search(len(cs), func(i int) bool { return !cs[i].Before(t) })
			if i < len(cs) {
				samples = append(samples, ms(cs[i].Sub(t)))
				newest[i] = maxTime(newest[i], t)
			}
		}
		for i, t := range newest {
			if !t.IsZero() {
				fromLast = append(fromLast, ms(cs[i].Sub(t)))
			}
		}
	}
	r.Latency = summarize(samples)
	r.LatencyFromLastWrite = summarize(fromLast)
}

// staleEnd reports whether workload w, whose last write began at last, ended on a template
// it had before then, where its sources' final content was new (see judge).
func staleEnd(w string, cs []time.Time, last time.Time, trace *ContentTrace) bool {
	after := trace.After[w]
	if len(after) != len(cs) || len(after) == 0 {
		return false
	}
	final := map[string]int{}
	earlier := map[string]map[int]bool{}
	for _, cw := range trace.Writes[w] {
		if v, ok := final[cw.Source]; ok {
			if earlier[cw.Source] == nil {
				earlier[cw.Source] = map[int]bool{}
			}
			earlier[cw.Source][v] = true
		}
		final[cw.Source] = cw.Version
	}
	if len(final) == 0 {
		return false
	}
	for src, v := range final {
		// 0 is the content the source was created with; absent, a delete.
		if v <= 0 || earlier[src][v] {
			return false
		}
	}
	end := after[len(after)-1]
	if first, ok := trace.First[w]; ok && first == end {
		return true
	}
	for i, t := range cs {
		if t.Before(last) && after[i] == end {
			return true
		}
	}
	return false
}

// noContent counts w's rollouts whose template has the signature of the one before.
func noContent(w string, trace *ContentTrace) int {
	prev, ok := trace.First[w]
	n := 0
	for _, sig := range trace.After[w] {
		if ok && sig == prev {
			n++
		}
		prev, ok = sig, true
	}
	return n
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func summarize(samples []float64) Latency {
	if len(samples) == 0 {
		return Latency{}
	}
	sort.Float64s(samples)
	q := func(p float64) float64 {
		return samples[int(math.Min(float64(len(samples)-1), math.Ceil(p*float64(len(samples)))-1))]
	}
	return Latency{P50: q(0.50), P95: q(0.95), P99: q(0.99), Max: samples[len(samples)-1], Samples: samples}
}

// settled reports whether every workload with writes changed after its last write.
func settled(writes map[string][]time.Time, changes map[string][]time.Time) bool {
	for w, ws := range writes {
		cs := changes[w]
		last := ws[0]
		for _, t := range ws {
			last = maxTime(last, t)
		}
		if len(cs) == 0 || cs[len(cs)-1].Before(last) {
			return false
		}
	}
	return true
}
