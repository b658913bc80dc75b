// Package report is the one reporter of the reload pipeline: every Event, metric, alert and
// log line that tells what a reconcile of a target did goes through a Reporter, and so does
// every notice a gate returns. It keeps the one "say once" memory: a hold, or a gate's notice,
// is announced when it begins or changes, not on every requeue.
//
// Gates never report: they return notices (gate.Notice), and the pipeline's driver hands them
// here. Writers (patch, Job replacement, evict) report through the narrow Events interface.
package report

import (
	"context"
	"errors"
	"github.com/go-logr/logr"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/reloader-operator/reloader/internal/alert"
	"github.com/reloader-operator/reloader/internal/gate"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/termsafe"
)

// Event reasons of a reload and of the reporter's own notices.
const (
	ReasonReloaded          = "Reloaded"
	ReasonReloadFail        = "ReloadFail"
	ReasonReloadSkipped     = "ReloadSkipped"
	ReasonInvalidAnnotation = "InvalidAnnotation"
	ReasonResumed           = "Resumed"
	ReasonReloadHeld        = "ReloadHeld"
	ReasonReloadNotified    = "ReloadNotified"
)

// Events is what a writer needs of the reporter: an Event on an object (and its log line is the
// writer's), and the count of an action it took.
type Events interface {
	// Event records an Event on regarding; related may be nil.
	Event(regarding client.Object, related runtime.Object, warning bool, reason, action, note string)
	// Action counts a write of kind's workloads (reloader_actions_total).
	Action(kind, action string)
}

// Reloaded is one reload written, as the reporter hears of it.
type Reloaded struct {
	Kind string
	// Workload is the workload as written.
	Workload client.Object
	Changes  []reload.Change
	At       time.Time
}

// Reporter says what the pipeline did. A nil Alerts sends no alert, a nil OnReload tells no
// one of the reloads; Recorder and Metrics are required.
type Reporter struct {
	Recorder recorder.EventRecorder
	Metrics  *metrics.Metrics
	Alerts   *alert.Alerter
	// OnReload, when set, hears of each reload after it is written (ReloaderConfig status).
	OnReload func(Reloaded)
	Now      func() time.Time

	mu sync.Mutex
	// m is the say-once memory, by target key: bounded by the targets that wait or were
	// told something by a gate; a target's entry goes with Forget.
	m map[string]*memory
}

// memory is what the reporter remembers of one target.
type memory struct {
	// waiting is the reason the target waits now ("" none), as reloader_reloads_waiting
	// counts it.
	waiting string
	// said are the Once values of the notices last said, by gate and reason.
	said map[string]string
}

// New returns a reporter.
func New(rec recorder.EventRecorder, m *metrics.Metrics, alerts *alert.Alerter) *Reporter {
	return &Reporter{Recorder: rec, Metrics: m, Alerts: alerts, Now: time.Now}
}

// Event implements Events.
func (r *Reporter) Event(regarding client.Object, related runtime.Object, warning bool, reason, action, note string) {
	typ := corev1.EventTypeNormal
	if warning {
		typ = corev1.EventTypeWarning
	}
	r.Recorder.Eventf(regarding, related, typ, reason, action, "%s", termsafe.ClipNote(note))
}

// Action implements Events.
func (r *Reporter) Action(kind, action string) {
	r.Metrics.Actions.WithLabelValues(kind, action).Inc()
}

// Alert queues an alert; none without an alerter.
func (r *Reporter) Alert(a alert.Reload) { r.Alerts.Queue(a) }

// Invalid reports bad settings of target: the valid ones still apply.
func (r *Reporter) Invalid(ctx context.Context, target client.Object, errs ...error) {
	if len(errs) == 0 {
		return
	}
	msg := errors.Join(errs...).Error()
	log.FromContext(ctx).Info("invalid reload annotation; the valid rules still apply", "error", msg)
	r.Event(target, nil, true, ReasonInvalidAnnotation, "Validate", msg)
}

// Say tells the gates' notices about target (key): each with a Once value is said when it
// differs from the last said by its gate with its reason, a Quiet one in the log at debug level
// only. When a reload was due (due), a gate that says nothing of a reason this time forgets
// it: said again when it comes back. A reconcile with nothing due forgets nothing: a source
// flapping back to the content the workload runs does not end a quarantine, and its next flip
// is not announced again. A notice marked Held counts its hold in
// reloader_reloads_held_total when said.
func (r *Reporter) Say(ctx context.Context, key string, target client.Object, related runtime.Object, said []gate.Said, due bool) {
	logger := log.FromContext(ctx)
	now := make(map[string]bool, len(said))
	for _, s := range said {
		if s.Written {
			continue // said by SayWritten, once the write went through
		}
		topic := s.Gate + "/" + s.Reason
		now[topic] = true
		if s.Once != "" && !r.first(key, topic, s.Once) {
			logger.V(1).Info(s.Message, "gate", s.Gate, "reason", s.Reason)
			continue
		}
		r.say(logger, target, related, s)
	}
	if !due {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if m := r.m[key]; m != nil {
		for topic := range m.said {
			if !now[topic] {
				delete(m.said, topic)
			}
		}
		r.drop(key, m)
	}
}

// SayWritten tells the gates' notices that wait for the write (gate.Notice.Written), the
// write of target having gone through: each time, whatever its Once.
func (r *Reporter) SayWritten(ctx context.Context, target client.Object, related runtime.Object, said []gate.Said) {
	logger := log.FromContext(ctx)
	for _, s := range said {
		if s.Written {
			r.say(logger, target, related, s)
		}
	}
}

// say counts notice s and tells it: a log line, and an Event unless it is quiet.
func (r *Reporter) say(logger logr.Logger, target client.Object, related runtime.Object, s gate.Said) {
	r.count(s.Notice)
	if s.Quiet {
		logger.V(1).Info(s.Message, "gate", s.Gate, "reason", s.Reason)
		return
	}
	logger.Info(s.Message, "gate", s.Gate, "reason", s.Reason)
	r.Event(target, related, s.Warning, s.Reason, s.Action, s.Message)
}

// count counts a notice said: the hold it announces, the gate's own counters, its alert.
func (r *Reporter) count(n gate.Notice) {
	if n.Held != "" {
		r.Metrics.Held.WithLabelValues(n.Held).Inc()
	}
	for _, c := range n.Count {
		c.Inc()
	}
	if n.Alert != nil {
		r.Alert(*n.Alert)
	}
}

// first records that the notice topic of key said once; it reports whether that is news.
func (r *Reporter) first(key, topic, once string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.entry(key)
	if had, ok := m.said[topic]; ok && had == once {
		return false
	}
	if m.said == nil {
		m.said = map[string]string{}
	}
	m.said[topic] = once
	return true
}

// Waiting counts key as waiting now for reason in reloader_reloads_waiting; "" counts it no
// more.
func (r *Reporter) Waiting(key, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.m[key]
	prev := ""
	if m != nil {
		prev = m.waiting
	}
	if prev == reason {
		return
	}
	if prev != "" {
		r.Metrics.Waiting.WithLabelValues(prev).Dec()
	}
	if reason != "" {
		r.Metrics.Waiting.WithLabelValues(reason).Inc()
		m = r.entry(key)
	}
	if m != nil {
		m.waiting = reason
		r.drop(key, m)
	}
}

// Forget drops what the reporter remembers of key (gone, not selected, another replica's).
func (r *Reporter) Forget(key string) {
	r.Waiting(key, "")
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, key)
}

func (r *Reporter) entry(key string) *memory {
	if r.m == nil {
		r.m = map[string]*memory{}
	}
	m := r.m[key]
	if m == nil {
		m = &memory{}
		r.m[key] = m
	}
	return m
}

// drop removes an entry that remembers nothing.
func (r *Reporter) drop(key string, m *memory) {
	if m.waiting == "" && len(m.said) == 0 {
		delete(r.m, key)
	}
}

func (r *Reporter) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}
