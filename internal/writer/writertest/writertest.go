// Package writertest gives the writers' tests a Reporter that remembers what it was told.
package writertest

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Event is one Event a writer reported.
type Event struct {
	Warning              bool
	Reason, Action, Note string
}

// Reporter remembers what it is told (it implements writer.Reporter).
type Reporter struct {
	mu       sync.Mutex
	Events   []Event
	Actions  []string // "kind/action"
	Recreate []string // "kind/namespace"
	Refused  []string // "kind/reason"
	Invalids []error
}

// Event implements writer.Reporter.
func (r *Reporter) Event(_ client.Object, _ runtime.Object, warning bool, reason, action, note string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Events = append(r.Events, Event{warning, reason, action, note})
}

// Action implements writer.Reporter.
func (r *Reporter) Action(kind, action string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Actions = append(r.Actions, kind+"/"+action)
}

// Recreated implements writer.Reporter.
func (r *Reporter) Recreated(kind, namespace string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Recreate = append(r.Recreate, kind+"/"+namespace)
}

// RecordRefused implements writer.Reporter.
func (r *Reporter) RecordRefused(kind, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Refused = append(r.Refused, kind+"/"+reason)
}

// Invalid implements writer.Reporter.
func (r *Reporter) Invalid(_ context.Context, _ client.Object, errs ...error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Invalids = append(r.Invalids, errs...)
}

// Reasons lists the reasons of the Events reported, in order.
func (r *Reporter) Reasons() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.Events {
		out = append(out, e.Reason)
	}
	return out
}
