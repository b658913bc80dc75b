package loadtest

import (
	"math"
	"sort"
	"time"

	"github.com/reloader-operator/reloader/internal/devtools/loadtest/faults"
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

	Workloads int `json:"workloads"`
	Writes    int `json:"writes"`
	// ExpectedMin and ExpectedMax bound the reloads: each workload with writes reloads at
	// least once and at most once per write.
	ExpectedMin int `json:"expectedMin"`
	ExpectedMax int `json:"expectedMax"`
	Reloads     int `json:"reloads"`
	// Missed counts workloads whose template never changed after the last write concerning them.
	Missed int `json:"missed"`
	// Duplicates counts template changes beyond one per write.
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

// judge compares the observed template changes with the writes each workload had to follow.
//
// A write is matched to the first template change at or after its start; a change covers the
// writes matched to it, those started after the change before it. That is the most a change
// can include, so a build whose patch lags a later write is credited with that write: the
// latency from the last write covered errs in favour of builds that roll once per write, never
// of builds that coalesce.
func judge(r *Result, writes map[string][]time.Time, tracked map[string]bool, changes map[string][]time.Time) {
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
		if len(cs) == 0 || cs[len(cs)-1].Before(last) {
			r.Missed++
			example("missed: " + w)
		}
		if extra := len(cs) - len(ws); extra > 0 {
			r.Duplicates += extra
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
