// Package mode is the notify and approve modes as gates (internal/approval decides). The mode
// of a due reload is resolved from the target's annotation, its changed sources', a
// ReloaderConfig's spec.mode and --mode: notify reports the reload and advances the record,
// nothing rolls; approve holds the reload until the target's approval annotation names the
// digest of the due changes, and spends that annotation in the write of the reload.
//
// They are two gates of one Mode, as the chain orders them: Notify comes before the waves (a
// notice rolls nothing, so no wave waits for it), Approve after them (approval is asked for
// once the target's wave is due).
//
// Nothing of it is kept by reloader on the objects for its decisions: the digest is computed
// from the sources, the time the content appeared from their writers (Source.Written), the
// approval is the user's annotation. The digest that waits is published in the target's
// approval.PendingAnnotation (Verdict.Annotate), so that `kubectl reloader approve` approves
// it without reading the hash key; it is removed once nothing waits, or in the write of the
// approved reload (Verdict.Spend).
package mode

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reloader-operator/reloader/internal/alert"
	"github.com/reloader-operator/reloader/internal/approval"
	"github.com/reloader-operator/reloader/internal/gate"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/termsafe"
	"github.com/reloader-operator/reloader/internal/whatchanged"
)

// Names of the two gates.
const (
	NotifyName  = "notify"
	ApproveName = "approve"
)

// Event reasons of the notify and approve modes.
const (
	ReasonReloadNotified  = "ReloadNotified"
	ReasonApprovalPending = "ApprovalPending"
)

// Poll is how often a reload waiting for approval is decided again when the target is read
// without watch (degraded mode): no event tells of the approval written on it.
const Poll = 30 * time.Second

// Config is what the modes are built from.
type Config struct {
	// Default is --mode: the mode where no annotation or ReloaderConfig says; empty: reload.
	Default approval.Mode
	// Held is reloader_reloads_held_total (by reason), Notified
	// reloader_reloads_notified_total (by kind and namespace), Pending
	// reloader_reloads_pending_approval; nil counts nothing.
	Held     *prometheus.CounterVec
	Notified *prometheus.CounterVec
	Pending  prometheus.Gauge
	// Target is the command the approval hint of a held reload gives; nil: `kubectl reloader
	// approve <kind>/<name> -n <namespace>`, or for a generic target the annotation to write.
	Target func(d gate.Due) string
}

// Mode holds what both gates share: the configuration and, per target whose reload waits
// for approval, the content it waits for (bounded by those targets; Forget drops one).
type Mode struct {
	c  Config
	mu sync.Mutex
	m  map[string]pending
}

type pending struct {
	digest string
	// first is when this process first saw digest due, for a content whose writer is unknown.
	first time.Time
	// counted: the Pending gauge counts the target.
	counted bool
}

// New returns the modes.
func New(c Config) *Mode { return &Mode{c: c, m: map[string]pending{}} }

// Notify is the gate of mode notify.
func (m *Mode) Notify() gate.Gate { return notifyGate{m} }

// Approve is the gate of mode approve.
func (m *Mode) Approve() gate.Gate { return approveGate{m} }

// resolve is the mode of d's due reload (approval.Resolve): the target's annotation, the
// sources', the ReloaderConfig's, --mode.
func (m *Mode) resolve(d gate.Due) (approval.Mode, []error) {
	dflt := approval.Mode(d.Overrides.Mode)
	switch {
	case dflt != "":
	case m.c.Default != "":
		dflt = m.c.Default
	default:
		dflt = approval.Reload
	}
	return approval.Resolve(d.Target.GetAnnotations(), d.Changes, func(ch reload.Change) map[string]string {
		return d.Sources[ch.ID].Annotations
	}, dflt)
}

// sources names d's due changes with what changed in each, for notices.
func sources(d gate.Due) []alert.Source {
	var what []whatchanged.Report
	if d.What != nil {
		what = d.What(d.Changes)
	}
	return alert.SourcesOf(d.Changes, what...)
}

type notifyGate struct{ m *Mode }

func (notifyGate) Name() string { return NotifyName }

// Forget drops what is kept of the target named key.
func (g notifyGate) Forget(key string) { g.m.forget(key) }

// Check turns a due reload of mode notify into a notice, said once its record is written: an
// Event naming the changed keys, an alert, the notified counter. It reports the mode
// annotations it could not read (the approve gate reads the same and does not).
func (g notifyGate) Check(_ context.Context, d gate.Due) (gate.Verdict, error) {
	if len(d.Changes) == 0 || d.Ahead != nil {
		return gate.Verdict{}, nil
	}
	mode, bad := g.m.resolve(d)
	v := gate.Verdict{Invalid: bad}
	if mode != approval.Notify {
		return v, nil
	}
	v.Notify = true
	src := sources(d)
	n := gate.Notice{Reason: ReasonReloadNotified, Action: "Notify", Written: true,
		Message: termsafe.ClipNote(fmt.Sprintf("Would reload %s %s after change of %s; mode notify: nothing restarted, the new hashes are recorded",
			d.Kind, d.Target.GetName(), alert.Describe(src))),
		Alert: &alert.Reload{Kind: d.Kind, Namespace: d.Target.GetNamespace(), Name: d.Target.GetName(), Sources: src, Time: d.Now, Mode: alert.ModeNotify}}
	if g.m.c.Notified != nil {
		n.Count = []prometheus.Counter{g.m.c.Notified.WithLabelValues(d.Kind, d.Target.GetNamespace())}
	}
	v.Notices = append(v.Notices, n)
	return v, nil
}

type approveGate struct{ m *Mode }

func (approveGate) Name() string { return ApproveName }

// Forget drops what is kept of the target named key, and its count in the Pending gauge.
func (g approveGate) Forget(key string) { g.m.forget(key) }

// Check holds a due reload of mode approve until the approval annotation names its digest,
// publishes the digest that waits, and spends the approval with the reload. When nothing is
// due, or a gate before it holds or notifies, nothing waits for approval: the published
// digest is removed.
func (g approveGate) Check(_ context.Context, d gate.Due) (gate.Verdict, error) {
	var v gate.Verdict
	mode := approval.Reload
	if len(d.Changes) > 0 && d.Ahead == nil && !d.Notify {
		mode, _ = g.m.resolve(d) // its bad annotations are the notify gate's to report
	}
	if mode != approval.Approve {
		g.m.done(d)
		v.Annotate = publish(d, "")
		return v, nil
	}
	ann := d.Target.GetAnnotations()
	approved, has := ann[approval.ApprovedAnnotation]
	since := written(d)
	ga := approval.Decide(mode, d.Changes, approved, has, since, g.m.target(d))
	if ga.Hold != nil && since.IsZero() {
		// No writer known (a deleted source): since this process first saw it due.
		ga = approval.Decide(mode, d.Changes, approved, has, g.m.since(d, ga.Digest), g.m.target(d))
	}
	v.Invalid = ga.Invalid
	if ga.Hold == nil {
		g.m.done(d)
		if ga.Approved {
			v.Spend = map[string]*string{approval.ApprovedAnnotation: nil, approval.PendingAnnotation: nil}
		} else {
			v.Annotate = publish(d, "")
		}
		return v, nil
	}
	v.Hold = *ga.Hold
	if d.Live {
		v.Requeue = Poll
	}
	g.m.waits(d, ga.Digest)
	v.Annotate = publish(d, ga.Digest)
	src := sources(d)
	n := gate.Notice{Reason: ReasonApprovalPending, Action: "Hold", Once: ga.Digest,
		Message: termsafe.ClipNote(fmt.Sprintf("Reload of %s %s after change of %s: %s", d.Kind, d.Target.GetName(), alert.Describe(src), v.Hold.Why)),
		Alert: &alert.Reload{Kind: d.Kind, Namespace: d.Target.GetNamespace(), Name: d.Target.GetName(), Sources: src, Time: d.Now,
			Held: v.Hold.Why, Mode: alert.ModeApprove}}
	if g.m.c.Held != nil {
		n.Count = []prometheus.Counter{g.m.c.Held.WithLabelValues(v.Hold.Reason)}
	}
	v.Notices = append(v.Notices, n)
	return v, nil
}

// publish is the change of d's target's approval.PendingAnnotation that says digest waits
// (""; nothing waits); nil when it says so already.
func publish(d gate.Due, digest string) map[string]*string {
	cur, has := d.Target.GetAnnotations()[approval.PendingAnnotation]
	switch {
	case digest == "" && !has, digest != "" && cur == digest:
		return nil
	case digest == "":
		return map[string]*string{approval.PendingAnnotation: nil}
	}
	return map[string]*string{approval.PendingAnnotation: &digest}
}

// written is when the due content appeared: the latest write of the changed sources, as
// their newest writers tell; zero when none is known.
func written(d gate.Due) time.Time {
	var since time.Time
	for _, ch := range d.Changes {
		if w := d.Sources[ch.ID].Written; w.After(since) {
			since = w
		}
	}
	return since
}

// target is the command the approval hint gives for d's target: `kubectl reloader approve`
// for a workload; for a generic target (a group-qualified kind, which the plugin does not
// take), the annotation the plugin would write, with the digest due.
func (m *Mode) target(d gate.Due) string {
	if m.c.Target != nil {
		return m.c.Target(d)
	}
	ns := " -n " + d.Target.GetNamespace()
	if strings.Contains(d.Kind, ".") {
		return "kubectl annotate " + strings.ToLower(d.Kind) + "/" + d.Target.GetName() + ns + " " +
			approval.ApprovedAnnotation + "=" + approval.Digest(d.Changes)
	}
	return "kubectl reloader approve " + strings.ToLower(d.Kind) + "/" + d.Target.GetName() + ns
}

// since is when this process first saw digest due on d's target (now, the first time; a
// DryRun remembers nothing, and knows no time it did not see).
func (m *Mode) since(d gate.Due, digest string) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.m[d.Key]
	if p.digest == digest && !p.first.IsZero() {
		return p.first
	}
	if d.DryRun {
		return time.Time{}
	}
	p.digest, p.first = digest, d.Now
	m.m[d.Key] = p
	return p.first
}

// waits notes that d's target waits for approval of digest: the Pending gauge counts it once,
// whatever the content.
func (m *Mode) waits(d gate.Due, digest string) {
	if d.DryRun {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.m[d.Key]
	if p.digest != digest {
		p.first = time.Time{}
	}
	p.digest = digest
	if !p.counted && m.c.Pending != nil {
		m.c.Pending.Inc()
		p.counted = true
	}
	m.m[d.Key] = p
}

// done notes that nothing of d's target waits for approval.
func (m *Mode) done(d gate.Due) {
	if !d.DryRun {
		m.forget(d.Key)
	}
}

// forget drops what is kept of key, and its count in the Pending gauge.
func (m *Mode) forget(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.m[key]; ok {
		if p.counted && m.c.Pending != nil {
			m.c.Pending.Dec()
		}
		delete(m.m, key)
	}
}
