// Package gatetest builds gate.Due values and a settable clock for the fast tests of gates:
// no API server, no manager, no reconciler.
package gatetest

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/gate"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/whatchanged"
)

// Epoch is the time a Clock starts at: fixed, so that tests read the same on every machine.
var Epoch = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

// Clock is a clock a test moves by hand.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock starts at Epoch.
func NewClock() *Clock { return &Clock{now: Epoch} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Step moves the clock on by d.
func (c *Clock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Builder makes a Due for a target of one kind in one namespace.
type Builder struct{ d gate.Due }

// For starts a Due of a target (a Deployment unless Kind says otherwise) with these
// annotations, at Epoch, with nothing due.
func For(namespace, name string, annotations map[string]string) *Builder {
	t := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Annotations: annotations, UID: types.UID("uid-" + name)},
	}
	return &Builder{d: gate.Due{
		Key: "Deployment/" + namespace + "/" + name, Kind: "Deployment", Target: t,
		Sources: map[source.ID]gate.Source{}, Now: Epoch,
	}}
}

// Kind sets the target's kind (and its key).
func (b *Builder) Kind(kind string) *Builder {
	b.d.Kind = kind
	b.d.Key = kind + "/" + b.d.Target.GetNamespace() + "/" + b.d.Target.GetName()
	return b
}

// Changed adds a due change of a ConfigMap (or Secret, by kind) to content hash, with the
// source's annotations.
func (b *Builder) Changed(kind source.Kind, name, hash string, annotations map[string]string) *Builder {
	id := source.ID{Kind: kind, Name: name}
	b.d.Changes = append(b.d.Changes, reload.Change{ID: id, Hash: hash})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: b.d.Target.GetNamespace(), Name: name, Annotations: annotations}}
	b.d.Sources[id] = gate.Source{Object: cm, Hash: hash, Annotations: annotations}
	if b.d.Related == nil {
		b.d.Related = cm
	}
	return b
}

// Source adds a source that concerns the target without a due change.
func (b *Builder) Source(kind source.Kind, name, hash string, annotations map[string]string) *Builder {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: b.d.Target.GetNamespace(), Name: name, Annotations: annotations}}
	b.d.Sources[source.ID{Kind: kind, Name: name}] = gate.Source{Object: cm, Hash: hash, Annotations: annotations}
	return b
}

// Written sets when a source's content was written.
func (b *Builder) Written(kind source.Kind, name string, at time.Time) *Builder {
	id := source.ID{Kind: kind, Name: name}
	s := b.d.Sources[id]
	s.Written = at
	b.d.Sources[id] = s
	return b
}

// What sets what the changes' keys and writers are said to be.
func (b *Builder) What(f func([]reload.Change) []whatchanged.Report) *Builder {
	b.d.What = f
	return b
}

// Ahead sets the hold of an earlier gate.
func (b *Builder) Ahead(gateName string, h reload.Hold) *Builder {
	b.d.Ahead = &gate.Held{Gate: gateName, Hold: h}
	return b
}

// Notified says that an earlier gate turned the reload into a notice.
func (b *Builder) Notified() *Builder { b.d.Notify = true; return b }

// Live makes the target's kind one read without watch.
func (b *Builder) Live() *Builder { b.d.Live = true; return b }

// Overrides sets the ReloaderConfig settings that apply.
func (b *Builder) Overrides(o reload.Overrides) *Builder { b.d.Overrides = o; return b }

// At sets the time of the decision.
func (b *Builder) At(t time.Time) *Builder { b.d.Now = t; return b }

// DryRun makes it explain's.
func (b *Builder) DryRun() *Builder { b.d.DryRun = true; return b }

// Target replaces the target object.
func (b *Builder) Target(o client.Object) *Builder { b.d.Target = o; return b }

// Due is the Due built.
func (b *Builder) Due() gate.Due { return b.d }
