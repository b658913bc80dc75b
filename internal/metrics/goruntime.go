package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// SlimGoCollector replaces, on reg, the Go collector controller-runtime registers with every
// runtime/metrics series (about 50 kB of the /metrics page, most of it histograms no
// dashboard reads, re-encoded at each scrape) by client_golang's default one: the
// go_memstats_* series, go_gc_duration_seconds, go_goroutines, go_threads, go_info and the
// GOGC, GOMEMLIMIT and GOMAXPROCS settings, which the chart's dashboard and the benchmarks
// read. On a registry without that collector (or once replaced) it does nothing.
func SlimGoCollector(reg prometheus.Registerer) {
	if reg.Unregister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsAll))) {
		Register(reg, collectors.NewGoCollector())
	}
}
