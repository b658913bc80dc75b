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
	// Reconciles counts workload reconciles by kind and outcome.
	Reconciles *prometheus.CounterVec
	// ReconcileDuration is how long one workload reconcile takes.
	ReconcileDuration *prometheus.HistogramVec
	// Actions counts the writes reloader makes, by workload kind and action.
	Actions *prometheus.CounterVec
	// Skipped counts reloads not made, by workload kind and reason.
	Skipped *prometheus.CounterVec
	// Notifications counts --webhook-url and alert deliveries, by target and success.
	Notifications *prometheus.CounterVec

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
		Reconciles: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reloader_reconcile_total",
			Help: "Workload reconciles, by workload kind and outcome (reloaded, recorded, unchanged, waiting, skipped, ignored, error).",
		}, []string{"kind", "outcome"})),
		ReconcileDuration: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "reloader_reconcile_duration_seconds",
			Help:    "Time one workload reconcile takes, API writes included.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"kind"})),
		Actions: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reloader_action_total",
			Help: "Writes reloader made, by workload kind and action (reload, pause, resume, replace-job, run-cronjob, notify).",
		}, []string{"kind", "action"})),
		Skipped: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reloader_skipped_total",
			Help: "Reloads not made although a source changed, by workload kind and reason.",
		}, []string{"kind", "reason"})),
		Notifications: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reloader_notifications_total",
			Help: "Notifications sent, by target (webhook, or the alert sink) and success.",
		}, []string{"target", "success"})),
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

// Outcomes of a reconcile, the values of reloader_reconcile_total's outcome label.
const (
	OutcomeReloaded  = "reloaded"
	OutcomeRecorded  = "recorded"
	OutcomeUnchanged = "unchanged"
	OutcomeWaiting   = "waiting"
	OutcomeSkipped   = "skipped"
	OutcomeIgnored   = "ignored"
	OutcomeError     = "error"
)

// Notified counts one notification delivery.
func (m *Metrics) Notified(target string, success bool) {
	m.Notifications.WithLabelValues(target, strconv.FormatBool(success)).Inc()
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
