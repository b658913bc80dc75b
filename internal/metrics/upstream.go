package metrics

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Upstream holds upstream Reloader's series, with its names, labels and label values, filled
// from what reloader does. Where the unit differs, the help text says so: upstream handles
// one source event at a time, reloader reconciles one workload at a time.
type Upstream struct {
	// Reconciles and ReconcileDuration are per workload reconcile, by result.
	Reconciles        *prometheus.CounterVec
	ReconcileDuration *prometheus.HistogramVec
	// Actions counts reload writes by workload kind and result; ActionLatency is the time
	// from the first source change a reload carries to its write.
	Actions       *prometheus.CounterVec
	ActionLatency *prometheus.HistogramVec
	Skipped       *prometheus.CounterVec
	Errors        *prometheus.CounterVec
	// EventsReceived counts watch events of sources (and namespaces, with a selector).
	EventsReceived *prometheus.CounterVec
	// WorkloadsScanned counts the workloads a source event's index lookup returned;
	// WorkloadsMatched those of them the event concerns.
	WorkloadsScanned *prometheus.CounterVec
	WorkloadsMatched *prometheus.CounterVec
}

// Label values, as upstream spells them.
const (
	ResultSuccess = "success"
	ResultError   = "error"
	// ResultSkipped: a source update that left its content as it was.
	ResultSkipped = "skipped"

	ErrorHandler     = "handler_error"
	ErrorWebhookSend = "webhook_send"

	SkipNotSelected  = "ignored_or_not_selected"
	SkipNoDataChange = "no_data_change"

	EventAdd    = "add"
	EventUpdate = "update"
	EventDelete = "delete"
)

func newUpstream(reg prometheus.Registerer) *Upstream {
	u := &Upstream{
		Reconciles: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reloader_reconcile_total",
			Help: "Workload reconciles, by result (success, error), and source updates that left the content unchanged (skipped).",
		}, []string{"result"})),
		ReconcileDuration: Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "reloader_reconcile_duration_seconds",
			Help:    "Time one workload reconcile takes, by result (success, error); skipped: the comparison of an update's content.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"result"})),
		Actions: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reloader_action_total",
			Help: "Reload writes, by workload kind (webhook for --webhook-url) and result (success, error).",
		}, []string{"workload_kind", "result"})),
		ActionLatency: Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "reloader_action_latency_seconds",
			Help:    "Time from the first source change a reload carries to its write, by workload kind.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"workload_kind"})),
		Skipped: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reloader_skipped_total",
			Help: "Work skipped, by reason (no_data_change, ignored_or_not_selected, finished_job).",
		}, []string{"reason"})),
		Errors: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reloader_errors_total",
			Help: "Errors, by type (handler_error: a reconcile failed and is retried; webhook_send).",
		}, []string{"type"})),
		EventsReceived: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reloader_events_received_total",
			Help: "Watch events received, by event type (add, update, delete) and resource type (configmaps, secrets, secretproviderclasspodstatuses, namespaces).",
		}, []string{"event_type", "resource_type"})),
		WorkloadsScanned: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reloader_workloads_scanned_total",
			Help: "Workloads looked at for a source event (found through the index of the sources they use), by kind.",
		}, []string{"kind"})),
		WorkloadsMatched: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reloader_workloads_matched_total",
			Help: "Workloads a source event concerns, by kind.",
		}, []string{"kind"})),
	}
	// Series that alerts divide or rate from the start, so they see a zero, not a gap.
	for _, r := range []string{ResultSuccess, ResultError} {
		u.Reconciles.WithLabelValues(r)
	}
	u.Errors.WithLabelValues(ErrorHandler)
	return u
}

// EventReceived counts one watch event of a resource type (plural, lower case).
func (u *Upstream) EventReceived(eventType, resourceType string) {
	u.EventsReceived.WithLabelValues(eventType, resourceType).Inc()
}

// SkippedNoDataChange counts a source update whose content is unchanged, as upstream does:
// a no_data_change skip and a reconcile with result "skipped" that took took.
func (u *Upstream) SkippedNoDataChange(took time.Duration) {
	u.Skipped.WithLabelValues(SkipNoDataChange).Inc()
	u.Reconciles.WithLabelValues(ResultSkipped).Inc()
	u.ReconcileDuration.WithLabelValues(ResultSkipped).Observe(took.Seconds())
}

// snake turns reloader's reason spelling (finished-job) into upstream's (finished_job).
func snake(s string) string { return strings.ReplaceAll(s, "-", "_") }
