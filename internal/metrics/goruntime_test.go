package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/reloader-operator/reloader/internal/metrics"
)

// The Go collector with every runtime/metrics series gives way to the default one, which
// keeps every go_* name the dashboard and the benchmarks read.
func TestSlimGoCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsAll)))
	metrics.SlimGoCollector(reg)
	metrics.SlimGoCollector(reg) // twice, as several managers in one process do
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
		if strings.HasPrefix(f.GetName(), "go_sched_latencies") || strings.HasPrefix(f.GetName(), "go_gc_heap_allocs_by_size") {
			t.Errorf("%s still exported", f.GetName())
		}
	}
	for _, want := range []string{"go_goroutines", "go_gc_duration_seconds", "go_memstats_heap_inuse_bytes", "go_memstats_heap_alloc_bytes",
		"go_memstats_heap_idle_bytes", "go_memstats_heap_released_bytes", "go_memstats_stack_inuse_bytes", "go_memstats_gc_sys_bytes"} {
		if !names[want] {
			t.Errorf("%s not exported", want)
		}
	}
}
