// Package coreevents records reloader's Events as core/v1 Events (the "" API group), as
// upstream Reloader does: tools that read upstream's Events (`source.component`
// reloader-configmaps / reloader-secrets, `count`, `lastTimestamp`) read reloader's alike, and
// upstream's RBAC (create and patch on core events) lets reloader write them. The Events are
// made by client-go's events.k8s.io recorder, so they keep their action, related object and
// series; only the requests go through the core API, which serves the same objects.
package coreevents

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

// Components name what reported an Event (reportingController and source.component), by the
// kind of the source that caused it: upstream's controllers are named after the resource they
// watch. Events that no source caused are Component's.
const (
	Component           = "reloader"
	ConfigMaps          = "reloader-configmaps"
	Secrets             = "reloader-secrets"
	SecretProviderClass = "reloader-secretproviderclasspodstatuses"
)

// componentOf is the component of an Event whose related object is of kind.
func componentOf(kind string) string {
	switch kind {
	case "ConfigMap":
		return ConfigMaps
	case "Secret":
		return Secrets
	case "SecretProviderClass", "SecretProviderClassPodStatus":
		return SecretProviderClass
	}
	return Component
}

// NewBroadcaster returns a broadcaster that writes through core, the core/v1 Events client.
// It sends nothing until StartRecordingToSinkWithContext.
func NewBroadcaster(core corev1client.EventsGetter) events.EventBroadcaster {
	b, _ := NewTrackedBroadcaster(core)
	return b
}

// NewTrackedBroadcaster is NewBroadcaster, with the Writes of its sink: what a stopping
// process waits for (Writes.Settle) so that the Events of its last actions are written.
func NewTrackedBroadcaster(core corev1client.EventsGetter) (events.EventBroadcaster, *Writes) {
	w := &Writes{}
	return events.NewBroadcaster(sink{core: core, writes: w}), w
}

// Writes counts the Event writes in flight through a sink, and when the last one began and
// the last Event was recorded (through a recorder from Stamping).
type Writes struct {
	inFlight atomic.Int64
	began    atomic.Int64 // UnixNano
	recorded atomic.Int64 // UnixNano
}

func (w *Writes) start() func() {
	w.began.Store(time.Now().UnixNano())
	w.inFlight.Add(1)
	return func() { w.inFlight.Add(-1) }
}

// Stamping returns rec, noting in w when each Event is recorded.
func (w *Writes) Stamping(rec recorder.EventRecorder) recorder.EventRecorder {
	return stamping{rec: rec, w: w}
}

type stamping struct {
	rec recorder.EventRecorder
	w   *Writes
}

func (s stamping) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	s.w.recorded.Store(time.Now().UnixNano())
	s.rec.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

func (s stamping) AnnotatedEventf(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	s.w.recorded.Store(time.Now().UnixNano())
	s.rec.AnnotatedEventf(regarding, related, annotations, eventtype, reason, action, note, args...)
}

// Settle waits until no write is in flight and none began, and no Event was recorded, for
// quiet, or until ctx ends: the recorder hands each Event to the broadcaster from a goroutine
// of its own, and the broadcaster each to a writer goroutine, so a quiet spell, not a count of
// Events, tells that the writes are done; with nothing recorded lately it returns at once.
// Call it before the broadcaster's Shutdown, which drops the Events handed over after it. It
// reports whether the writes settled.
func (w *Writes) Settle(ctx context.Context, quiet time.Duration) bool {
	tick := time.NewTicker(max(quiet/10, time.Millisecond))
	defer tick.Stop()
	for {
		last := max(w.recorded.Load(), w.began.Load())
		if w.inFlight.Load() == 0 && time.Since(time.Unix(0, last)) >= quiet {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// NewRecorder returns a recorder whose Events are reported by the component their related
// object (the source that changed) calls for.
func NewRecorder(b events.EventBroadcaster, scheme *runtime.Scheme) recorder.EventRecorder {
	r := byComponent{}
	for _, c := range []string{Component, ConfigMaps, Secrets, SecretProviderClass} {
		rec := b.NewRecorder(scheme, c)
		if both, ok := rec.(recorder.EventRecorder); ok {
			r[c] = both
		} else {
			r[c] = unannotated{rec}
		}
	}
	return r
}

// unannotated serves AnnotatedEventf with Eventf, for a recorder without annotations.
type unannotated struct{ events.EventRecorder }

func (u unannotated) AnnotatedEventf(regarding, related runtime.Object, _ map[string]string, eventtype, reason, action, note string, args ...any) {
	u.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

type byComponent map[string]recorder.EventRecorder

func (r byComponent) pick(related runtime.Object) recorder.EventRecorder {
	if related == nil {
		return r[Component]
	}
	kind := related.GetObjectKind().GroupVersionKind().Kind
	if ref, ok := related.(*corev1.ObjectReference); ok {
		kind = ref.Kind
	}
	return r[componentOf(kind)]
}

func (r byComponent) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.pick(related).Eventf(regarding, related, eventtype, reason, action, note, args...)
}

func (r byComponent) AnnotatedEventf(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	r.pick(related).AnnotatedEventf(regarding, related, annotations, eventtype, reason, action, note, args...)
}

// sink writes events.k8s.io Events through the core/v1 API, counted in writes.
type sink struct {
	core   corev1client.EventsGetter
	writes *Writes
}

func (s sink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	defer s.writes.start()()
	out, err := s.core.Events(e.Namespace).Create(ctx, ToCore(e), metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return FromCore(out), nil
}

func (s sink) Update(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	defer s.writes.start()()
	out, err := s.core.Events(e.Namespace).Update(ctx, ToCore(e), metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	return FromCore(out), nil
}

// Patch records a repeat of e: its series, and, for readers of core Events, count and
// lastTimestamp as upstream's recorder keeps them. The events.k8s.io patch client-go made
// (data) carries the series only, so it is made again here.
func (s sink) Patch(ctx context.Context, e *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	defer s.writes.start()()
	patch := map[string]any{}
	if e.Series != nil {
		last := metav1.NewTime(e.Series.LastObservedTime.Time)
		patch["series"] = map[string]any{"count": e.Series.Count, "lastObservedTime": e.Series.LastObservedTime}
		patch["count"] = e.Series.Count
		patch["lastTimestamp"] = last
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return nil, err
	}
	out, err := s.core.Events(e.Namespace).Patch(ctx, e.Name, types.MergePatchType, data, metav1.PatchOptions{})
	if err != nil {
		return nil, err
	}
	return FromCore(out), nil
}

// ToCore is e as a core/v1 Event, with the fields of upstream's (client-go record) Events set
// too: source.component (the reporting controller), first and last timestamps, count.
func ToCore(e *eventsv1.Event) *corev1.Event {
	first := e.DeprecatedFirstTimestamp
	if first.IsZero() {
		first = metav1.NewTime(e.EventTime.Time)
	}
	last := e.DeprecatedLastTimestamp
	if last.IsZero() {
		last = first
	}
	count := e.DeprecatedCount
	if count == 0 {
		count = 1
	}
	c := &corev1.Event{
		ObjectMeta:          *e.ObjectMeta.DeepCopy(),
		InvolvedObject:      e.Regarding,
		Reason:              e.Reason,
		Message:             e.Note,
		Source:              corev1.EventSource{Component: e.ReportingController},
		FirstTimestamp:      first,
		LastTimestamp:       last,
		Count:               count,
		Type:                e.Type,
		EventTime:           e.EventTime,
		Action:              e.Action,
		Related:             e.Related,
		ReportingController: e.ReportingController,
		ReportingInstance:   e.ReportingInstance,
	}
	if e.Series != nil {
		c.Series = &corev1.EventSeries{Count: e.Series.Count, LastObservedTime: e.Series.LastObservedTime}
		c.Count = e.Series.Count
		c.LastTimestamp = metav1.NewTime(e.Series.LastObservedTime.Time)
	}
	return c
}

// FromCore is c as an events.k8s.io Event, as the API server converts it.
func FromCore(c *corev1.Event) *eventsv1.Event {
	e := &eventsv1.Event{
		ObjectMeta:               *c.ObjectMeta.DeepCopy(),
		EventTime:                c.EventTime,
		ReportingController:      c.ReportingController,
		ReportingInstance:        c.ReportingInstance,
		Action:                   c.Action,
		Reason:                   c.Reason,
		Regarding:                c.InvolvedObject,
		Related:                  c.Related,
		Note:                     c.Message,
		Type:                     c.Type,
		DeprecatedSource:         c.Source,
		DeprecatedFirstTimestamp: c.FirstTimestamp,
		DeprecatedLastTimestamp:  c.LastTimestamp,
		DeprecatedCount:          c.Count,
	}
	if c.Series != nil {
		e.Series = &eventsv1.EventSeries{Count: c.Series.Count, LastObservedTime: c.Series.LastObservedTime}
	}
	return e
}
