// Package metrics defines reloader's Prometheus metrics. Upstream Reloader's metric names
// keep upstream's labels and meaning (upstream.go), so its dashboards and alerts keep working;
// reloader's richer series have names of their own.
package metrics

import (
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are reloader's own collectors, and upstream's.
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
	// RolloutOutcomes counts how the rollouts that followed reloads ended, by workload kind
	// and outcome (complete, stalled).
	RolloutOutcomes *prometheus.CounterVec
	// RolloutsFollowed is how many rollouts are followed now (at most one per workload).
	RolloutsFollowed prometheus.Gauge
	// Waiting is how many workloads wait now to reload, by reason: coalesce, pause,
	// min-interval, reload-window, rate-limit.
	Waiting *prometheus.GaugeVec
	// Held counts reloads held back by pacing, by reason, once per hold (not per requeue).
	Held *prometheus.CounterVec
	// Quarantined is how many sources the flap breaker holds in quarantine now.
	Quarantined prometheus.Gauge
	// WavesHalted is 1 for each source whose health-gated waves a stalled rollout halted, by
	// namespace, source kind and name; the series goes once a reconcile finds them unhalted.
	WavesHalted *prometheus.GaugeVec
	// RecordsRefused counts Job replacement records not acted on, by workload kind and reason
	// (unauthenticated, misplaced, oversized): forged or damaged ControllerRevisions.
	RecordsRefused *prometheus.CounterVec
	// ReloadsByManager counts workload reloads by workload kind and the field manager that
	// wrote the change (a bounded set of names, whatchanged.Label).
	ReloadsByManager *prometheus.CounterVec
	// CachesSynced is 1 once every watched kind's cache has synced (when /ready turns ok).
	CachesSynced prometheus.Gauge
	// ReloadsNotified counts due reloads reported instead of rolled (mode notify), by workload kind
	// and namespace, once per content.
	ReloadsNotified *prometheus.CounterVec
	// PendingApproval is how many workloads have a reload waiting for approval now (mode
	// approve).
	PendingApproval prometheus.Gauge
	// AlertsDropped counts alerts dropped from the alert queue, by the namespace whose alert
	// was dropped (its share of the queue full).
	AlertsDropped *prometheus.CounterVec

	// Upstream holds upstream's series.
	Upstream *Upstream
	// Queues measures the work queues for upstream's reloader_workqueue_* series.
	Queues *Queues
	// Hook, when set before the manager starts, hears of each workload reconcile (hook.go).
	Hook ReconcileHook

	byNamespace bool
}

// New registers the collectors on reg. Registering twice (several managers in one test
// process) reuses the first set.
func New(reg prometheus.Registerer, countByNamespace bool) *Metrics {
	m := &Metrics{
		ReloadExecuted: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reloader_reload_executed_total",
			Help: "Workload reloads, by success.",
		}, []string{"success"})),
		ReloadExecutedByNamespace: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reloader_reload_executed_total_by_namespace",
			Help: "Workload reloads, by success and namespace (METRICS_COUNT_BY_NAMESPACE=enabled).",
		}, []string{"success", "namespace"})),
		Errors: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reloader_reconcile_errors_total",
			Help: "Workload reconciles that failed, by workload kind.",
		}, []string{"kind"})),
		ChangeToPatch: Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "reloader_change_to_patch_seconds",
			Help:    "Time from a workload's first pending source change to its reload patch, coalescing window included.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		})),
		Reconciles: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reloader_workload_reconcile_total",
			Help: "Workload reconciles, by workload kind and outcome (reloaded, recorded, unchanged, waiting, held, skipped, ignored, conflict, error).",
		}, []string{"kind", "outcome"})),
		ReconcileDuration: Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "reloader_workload_reconcile_duration_seconds",
			Help:    "Time one workload reconcile takes, API writes included, by workload kind.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"kind"})),
		Actions: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reloader_workload_action_total",
			Help: "Writes reloader made, by workload kind and action (reload, pause, resume, replace-job, run-cronjob, notify).",
		}, []string{"kind", "action"})),
		Skipped: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reloader_workload_skipped_total",
			Help: "Reloads not made although a source changed, by workload kind and reason.",
		}, []string{"kind", "reason"})),
		Notifications: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reloader_notifications_total",
			Help: "Notifications sent, by target (webhook, or the alert sink) and success.",
		}, []string{"target", "success"})),
		RolloutOutcomes: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reloader_rollouts_total",
			Help: "Rollouts followed after a reload, by workload kind and how they ended (complete, stalled).",
		}, []string{"kind", "outcome"})),
		RolloutsFollowed: Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "reloader_rollouts_following",
			Help: "Rollouts followed now, after a reload, until they complete or stall (at most one per workload).",
		})),
		Waiting: Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "reloader_reloads_waiting",
			Help: "Workloads whose reload waits now, by reason (coalesce, pause, min-interval, reload-window, rate-limit, quarantine).",
		}, []string{"reason"})),
		Held: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reloader_reloads_held_total",
			Help: "Reloads held back by pacing or the flap breaker, by reason (min-interval, reload-window, rate-limit, quarantine); counted once per hold.",
		}, []string{"reason"})),
		Quarantined: Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "reloader_quarantined_sources",
			Help: "Sources the flap breaker holds in quarantine now (changing too often, oscillating, or written alternately by different field managers): the reloads they would cause wait.",
		})),
		WavesHalted: Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "reloader_waves_halted",
			Help: "1 for each ConfigMap or Secret whose health-gated waves are halted by a stalled rollout, by namespace, source kind and name.",
		}, []string{"namespace", "kind", "name"})),
		RecordsRefused: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reloader_replacement_records_refused_total",
			Help: "Job replacement records (ControllerRevisions) not acted on, by workload kind and reason (unauthenticated, misplaced, oversized).",
		}, []string{"kind", "reason"})),
		ReloadsByManager: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reloader_reloads_total",
			Help: "Workload reloads, by workload kind and the field manager that wrote the change (well-known managers by name, others as \"other\", none known as \"unknown\").",
		}, []string{"kind", "trigger_manager"})),
		CachesSynced: Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "reloader_caches_synced",
			Help: "1 once the cache of every watched kind has synced (when /ready turns ok), 0 before.",
		})),
		ReloadsNotified: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reloader_reloads_notified_total",
			Help: "Reloads reported instead of rolled (mode notify: Event ReloadNotified, alert), by workload kind and namespace; once per content.",
		}, []string{"kind", "namespace"})),
		PendingApproval: Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "reloader_reloads_pending_approval",
			Help: "Workloads whose reload waits for approval now (mode approve; kubectl reloader approve).",
		})),
		AlertsDropped: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reloader_alerts_dropped_total",
			Help: "Alerts dropped from the alert queue, by the namespace whose alert was dropped: one namespace's flood drops its own, never another's.",
		}, []string{"namespace"})),
		Upstream:    newUpstream(reg),
		Queues:      newQueues(reg),
		byNamespace: countByNamespace,
	}
	// Export both series from the start, so that rate() and alerts see a zero, not a gap.
	for _, success := range []string{"true", "false"} {
		m.ReloadExecuted.WithLabelValues(success)
	}
	for _, reason := range WaitReasons {
		m.Waiting.WithLabelValues(reason)
	}
	for _, reason := range WaitReasons[2:] {
		m.Held.WithLabelValues(reason)
	}
	return m
}

// Outcomes of a reconcile, the values of reloader_workload_reconcile_total's outcome label.
const (
	OutcomeReloaded  = "reloaded"
	OutcomeRecorded  = "recorded"
	OutcomeUnchanged = "unchanged"
	OutcomeWaiting   = "waiting"
	OutcomeHeld      = "held"
	OutcomeSkipped   = "skipped"
	OutcomeIgnored   = "ignored"
	OutcomeError     = "error"
	// OutcomeConflict: a write met a newer version of the object (409) and is retried.
	OutcomeConflict = "conflict"
)

// WaitReasons are the values of reloader_reloads_waiting's reason label: the waits before
// pacing, then pacing's holds (reload.Hold*).
var WaitReasons = []string{"coalesce", "pause", "min-interval", "reload-window", "rate-limit", "quarantine", "wave", "waves-halted"}

// Reconciled counts one workload reconcile, here and in upstream's series: a reconcile in a
// namespace the selector leaves out is upstream's ignored_or_not_selected skip, a failed one
// is upstream's handler_error (the work queue retries it).
func (m *Metrics) Reconciled(kind, outcome string, took time.Duration) {
	m.Reconciles.WithLabelValues(kind, outcome).Inc()
	m.ReconcileDuration.WithLabelValues(kind).Observe(took.Seconds())
	result := ResultSuccess
	switch outcome {
	case OutcomeError:
		result = ResultError
		m.Errors.WithLabelValues(kind).Inc()
		m.Upstream.Errors.WithLabelValues(ErrorHandler).Inc()
	case OutcomeIgnored:
		m.Upstream.Skipped.WithLabelValues(SkipNotSelected).Inc()
	}
	m.Upstream.Reconciles.WithLabelValues(result).Inc()
	m.Upstream.ReconcileDuration.WithLabelValues(result).Observe(took.Seconds())
}

// ReloadedBy counts one workload reload by the manager that wrote its change; manager is a
// bounded label value (whatchanged.Label).
func (m *Metrics) ReloadedBy(kind, manager string) {
	m.ReloadsByManager.WithLabelValues(kind, manager).Inc()
}

// Reloaded counts one workload reload. latency, from the first source change it carries to
// the write, is observed when known (> 0) and the reload succeeded.
func (m *Metrics) Reloaded(kind, namespace string, success bool, latency time.Duration) {
	s := strconv.FormatBool(success)
	m.ReloadExecuted.WithLabelValues(s).Inc()
	if m.byNamespace {
		m.ReloadExecutedByNamespace.WithLabelValues(s, namespace).Inc()
	}
	result := ResultSuccess
	if !success {
		result = ResultError
	}
	m.Upstream.Actions.WithLabelValues(kind, result).Inc()
	if success && latency > 0 {
		m.ChangeToPatch.Observe(latency.Seconds())
		m.Upstream.ActionLatency.WithLabelValues(kind).Observe(latency.Seconds())
	}
}

// SkippedReload counts a reload not made although a source changed. Upstream's reason
// values are snake_case.
func (m *Metrics) SkippedReload(kind, reason string) {
	m.Skipped.WithLabelValues(kind, reason).Inc()
	m.Upstream.Skipped.WithLabelValues(snake(reason)).Inc()
}

// Notified counts one notification delivery; a --webhook-url one is also upstream's action
// of workload kind "webhook".
func (m *Metrics) Notified(target string, success bool) {
	m.Notifications.WithLabelValues(target, strconv.FormatBool(success)).Inc()
	if target != TargetWebhook {
		return
	}
	if success {
		m.Actions.WithLabelValues(TargetWebhook, "notify").Inc()
		m.Upstream.Actions.WithLabelValues(TargetWebhook, ResultSuccess).Inc()
		return
	}
	m.Upstream.Actions.WithLabelValues(TargetWebhook, ResultError).Inc()
	m.Upstream.Errors.WithLabelValues(ErrorWebhookSend).Inc()
}

// TargetWebhook is the notification target of --webhook-url.
const TargetWebhook = "webhook"

// Register registers c on reg and returns it; when a collector of the same description is
// registered already (several managers in one test process), it returns that one instead.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			return are.ExistingCollector.(C)
		}
		panic(err) // only a programming error (bad name or labels) gets here
	}
	return c
}
