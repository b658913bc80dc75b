package loadtest

import (
	"math"
	"strings"
	"time"
)

// Usage is the controller process as /proc saw it: totals, averages over the whole run,
// steady state (the second half of the load), and peaks.
type Usage struct {
	CPUSeconds     float64 `json:"cpuSeconds"`
	CPUAvgCores    float64 `json:"cpuAvgCores"`
	CPUSteadyCores float64 `json:"cpuSteadyCores"`
	// CPUPeakCores is the highest CPU rate over any 5 s.
	CPUPeakCores float64 `json:"cpuPeakCores"`
	RSSAvgMiB    float64 `json:"rssAvgMiB"`
	RSSSteadyMiB float64 `json:"rssSteadyMiB"`
	RSSPeakMiB   float64 `json:"rssPeakMiB"`
	Samples      int     `json:"samples"`
	// CPUStartupSeconds is the CPU spent before the load began (start-up: caches filled, first
	// records written), from the last sample before it; nil without one. Shown, not judged:
	// the CPU gate judges the whole run.
	CPUStartupSeconds *float64 `json:"cpuStartupSeconds,omitempty"`
	// RSSStartupMiB is the RSS when the load began (caches synced, start-up done), from the
	// last sample before it; nil without one.
	RSSStartupMiB *float64 `json:"rssStartupMiB,omitempty"`
}

// Runtime is what the controller's /metrics told, added up over restarts; a figure the binary
// does not expose is nil.
type Runtime struct {
	Errors           *float64 `json:"errors,omitempty"`
	WorkloadsScanned *float64 `json:"workloadsScanned,omitempty"`
	WorkloadsMatched *float64 `json:"workloadsMatched,omitempty"`
	Reconciles       *float64 `json:"reconciles,omitempty"`
	// ReconcilesPerSecond is over the load and its settling; Peak over any 5 s.
	ReconcilesPerSecond     *float64 `json:"reconcilesPerSecond,omitempty"`
	ReconcilesPerSecondPeak *float64 `json:"reconcilesPerSecondPeak,omitempty"`
	ReconcileDurationMs     *Latency `json:"reconcileDurationMs,omitempty"`
	ActionLatencyMs         *Latency `json:"actionLatencyMs,omitempty"`
	QueueDepthPeak          *float64 `json:"queueDepthPeak,omitempty"`
	HeapSteadyMiB           *float64 `json:"heapSteadyMiB,omitempty"`
	HeapPeakMiB             *float64 `json:"heapPeakMiB,omitempty"`
	GoroutinesSteady        *float64 `json:"goroutinesSteady,omitempty"`
	GoroutinesPeak          *float64 `json:"goroutinesPeak,omitempty"`
	// GCPauseMaxMs is the longest GC pause the Go runtime reports (go_gc_duration_seconds
	// quantile 1): an upper bound of the p99, which the default Go collector does not give.
	GCPauseMaxMs *float64 `json:"gcPauseMaxMs,omitempty"`
	// ReconcileBaseline is the reconcile rate before the load; ReconcileReturnSeconds the time
	// from the load's settling until the rate was back at it (nil: no reconcile counter, or
	// not back within the window looked at, see ReconcileNotBack).
	ReconcileBaseline      *float64 `json:"reconcileBaseline,omitempty"`
	ReconcileReturnSeconds *float64 `json:"reconcileReturnSeconds,omitempty"`
	ReconcileNotBack       bool     `json:"reconcileNotBack,omitempty"`
	// Counters are the raw sums of the counters the report knows, by name.
	Counters map[string]float64 `json:"counters,omitempty"`
}

// Names the figures are read from, first found wins: upstream's names, then this project's
// and controller-runtime's.
var (
	errorsMetrics     = []string{"reloader_errors_total", "reloader_reconcile_errors_total", "controller_runtime_reconcile_errors_total"}
	reconcileMetrics  = []string{"reloader_reconcile_total", "controller_runtime_reconcile_total"}
	reconcileHist     = []string{"reloader_reconcile_duration_seconds", "controller_runtime_reconcile_time_seconds"}
	actionHist        = []string{"reloader_action_latency_seconds", "reloader_change_to_patch_seconds"}
	queueDepthMetrics = []string{"reloader_workqueue_depth", "workqueue_depth"}
	counterMetrics    = []string{"reloader_reload_executed_total", "reloader_reconcile_total", "reloader_action_total", "reloader_skipped_total",
		"reloader_errors_total", "reloader_workloads_scanned_total", "reloader_workloads_matched_total", "reloader_events_received_total",
		"reloader_workload_reconcile_total", "reloader_workload_action_total", "reloader_workload_skipped_total", "reloader_reconcile_errors_total",
		"reloader_retries_total", "controller_runtime_reconcile_total", "controller_runtime_reconcile_errors_total", "rest_client_requests_total"}
)

// window is a span of the run.
type window struct{ from, to time.Time }

func (w window) has(t time.Time) bool { return !t.Before(w.from) && !t.After(w.to) }

// usage derives the process figures from the samples.
func usage(samples []Sample, cpuSeconds float64, peakRSS int64, run, steady window, loadFrom time.Time) Usage {
	u := Usage{CPUSeconds: cpuSeconds, RSSPeakMiB: float64(peakRSS) / (1 << 20), Samples: len(samples)}
	for _, s := range samples {
		if !s.At.Before(loadFrom) {
			break
		}
		cpu, rss := s.CPU, float64(s.RSS)/(1<<20)
		u.CPUStartupSeconds, u.RSSStartupMiB = &cpu, &rss
	}
	if s := run.to.Sub(run.from).Seconds(); s > 0 {
		u.CPUAvgCores = cpuSeconds / s
	}
	var all, st []float64
	for _, s := range samples {
		all = append(all, float64(s.RSS)/(1<<20))
		if steady.has(s.At) {
			st = append(st, float64(s.RSS)/(1<<20))
		}
	}
	u.RSSAvgMiB, u.RSSSteadyMiB = mean(all), mean(st)
	u.CPUSteadyCores = rateOver(samples, steady, func(s Sample) (float64, bool) { return s.CPU, true })
	u.CPUPeakCores = peakRate(samples, 5*time.Second, func(s Sample) (float64, bool) { return s.CPU, true })
	return u
}

// runtimeFigures derives the /metrics figures from the samples and the final totals.
func runtimeFigures(samples []Sample, totals Scrape, load, steady window) Runtime {
	var r Runtime
	opt := func(v float64, ok bool) *float64 {
		if !ok {
			return nil
		}
		return &v
	}
	_, v, ok := totals.first(errorsMetrics...)
	r.Errors = opt(v, ok)
	v, ok = totals.Sums["reloader_workloads_scanned_total"]
	r.WorkloadsScanned = opt(v, ok)
	v, ok = totals.Sums["reloader_workloads_matched_total"]
	r.WorkloadsMatched = opt(v, ok)
	name, v, ok := totals.first(reconcileMetrics...)
	r.Reconciles = opt(v, ok)
	if ok {
		counter := func(s Sample) (float64, bool) {
			if s.Metrics == nil {
				return 0, false
			}
			v, ok := s.Metrics.Sums[name]
			return v, ok
		}
		r.ReconcilesPerSecond = opt(rateOver(samples, load, counter), true)
		r.ReconcilesPerSecondPeak = opt(peakRate(samples, 5*time.Second, counter), true)
	}
	hist := func(names []string) *Latency {
		for _, n := range names {
			if b, ok := totals.Buckets[n]; ok {
				p50, ok := quantile(b, 0.5)
				if !ok {
					continue
				}
				p95, _ := quantile(b, 0.95)
				p99, _ := quantile(b, 0.99)
				return &Latency{P50: p50 * 1000, P95: p95 * 1000, P99: p99 * 1000}
			}
		}
		return nil
	}
	r.ReconcileDurationMs, r.ActionLatencyMs = hist(reconcileHist), hist(actionHist)
	gauge := func(names []string, scale float64) (peak, steadyMean *float64) {
		var pk float64
		var st []float64
		found := false
		for _, s := range samples {
			if s.Metrics == nil {
				continue
			}
			_, v, ok := s.Metrics.first(names...)
			if !ok {
				continue
			}
			found = true
			pk = max(pk, v/scale)
			if steady.has(s.At) {
				st = append(st, v/scale)
			}
		}
		if !found {
			return nil, nil
		}
		m := mean(st)
		return &pk, &m
	}
	r.QueueDepthPeak, _ = gauge(queueDepthMetrics, 1)
	r.HeapPeakMiB, r.HeapSteadyMiB = gauge([]string{"go_memstats_heap_alloc_bytes"}, 1<<20)
	r.GoroutinesPeak, r.GoroutinesSteady = gauge([]string{"go_goroutines"}, 1)
	if pk, _ := gauge([]string{`go_gc_duration_seconds{quantile="1"}`}, 1e-3); pk != nil {
		r.GCPauseMaxMs = pk
	}
	r.Counters = map[string]float64{}
	for _, n := range counterMetrics {
		if v, ok := totals.Sums[n]; ok {
			r.Counters[n] = v
		}
	}
	for n, v := range totals.Sums {
		if strings.HasPrefix(n, outcomeMetric+"{") {
			r.Counters[n] = v
		}
	}
	return r
}

// rateOver is the growth per second of a counter between the first and the last sample that
// has it inside w.
func rateOver(samples []Sample, w window, value func(Sample) (float64, bool)) float64 {
	var first, last *Sample
	var fv, lv float64
	for i := range samples {
		s := &samples[i]
		v, ok := value(*s)
		if !ok || !w.has(s.At) {
			continue
		}
		if first == nil {
			first, fv = s, v
		}
		last, lv = s, v
	}
	if first == nil || last == first {
		return 0
	}
	return math.Max(0, lv-fv) / last.At.Sub(first.At).Seconds()
}

// peakRate is the highest growth per second of a counter over any span of about width.
func peakRate(samples []Sample, width time.Duration, value func(Sample) (float64, bool)) float64 {
	type point struct {
		at time.Time
		v  float64
	}
	var pts []point
	for _, s := range samples {
		if v, ok := value(s); ok {
			pts = append(pts, point{s.At, v})
		}
	}
	peak := 0.0
	j := 0
	for i := range pts {
		for j < i && pts[i].at.Sub(pts[j].at) > width {
			j++
		}
		if d := pts[i].at.Sub(pts[j].at).Seconds(); d >= width.Seconds()/2 {
			peak = math.Max(peak, (pts[i].v-pts[j].v)/d)
		}
	}
	return peak
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
