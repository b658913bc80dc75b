// Package metrics defines reloader's Prometheus metrics. The names users chart with upstream
// Reloader keep their meaning.
package metrics

import (
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are reloader's own collectors.
type Metrics struct {
	// ReloadExecuted counts workload reloads by success, as upstream does.
	ReloadExecuted *prometheus.CounterVec
	// ReloadExecutedByNamespace is the same by namespace; only filled when enabled, because
	// its cardinality grows with the namespaces.
	ReloadExecutedByNamespace *prometheus.CounterVec
	// Errors counts failed reconciles by kind.
	Errors *prometheus.CounterVec
	// ChangeToPatch is the time from the first source change a reload carries to its patch.
	ChangeToPatch prometheus.Histogram

	byNamespace bool
}

// New registers the collectors on reg. Registering twice (several managers in one test
// process) reuses the first set.
func New(reg prometheus.Registerer, countByNamespace bool) *Metrics {
	m := &Metrics{
		ReloadExecuted: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reloader_reload_executed_total",
			Help: "Workload reloads, by success.",
		}, []string{"success"})),
		ReloadExecutedByNamespace: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reloader_reload_executed_total_by_namespace",
			Help: "Workload reloads, by success and namespace (METRICS_COUNT_BY_NAMESPACE=enabled).",
		}, []string{"success", "namespace"})),
		Errors: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reloader_reconcile_errors_total",
			Help: "Workload reconciles that failed, by workload kind.",
		}, []string{"kind"})),
		ChangeToPatch: register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "reloader_change_to_patch_seconds",
			Help:    "Time from a workload's first pending source change to its reload patch, coalescing window included.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		})),
		byNamespace: countByNamespace,
	}
	// Export both series from the start, so that rate() and alerts see a zero, not a gap.
	for _, success := range []string{"true", "false"} {
		m.ReloadExecuted.WithLabelValues(success)
	}
	return m
}

// Reloaded counts one workload reload.
func (m *Metrics) Reloaded(namespace string, success bool) {
	s := strconv.FormatBool(success)
	m.ReloadExecuted.WithLabelValues(s).Inc()
	if m.byNamespace {
		m.ReloadExecutedByNamespace.WithLabelValues(s, namespace).Inc()
	}
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			return are.ExistingCollector.(C)
		}
		panic(err) // only a programming error (bad name or labels) gets here
	}
	return c
}
