package lookup

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	crsource "sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
)

// Observer hears the events of one source type; its predicate's answers are ignored. The
// change table (track.Changes.Observe) and the flap breaker's observation are observers.
type Observer func(sourcecache.SourceType) predicate.Predicate

// SourceEvents hears each event of a source type once for every workload controller of a
// manager: one informer handler per source type runs the observers once, then hands the
// event to the SourceMapper of each workload kind whose predicates let it through. An
// observer runs before any lookup the event starts, so a reconcile it queues finds the
// change observed. One SourceEvents serves the reconcilers of one manager.
type SourceEvents struct {
	observers []Observer
	mu        sync.Mutex
	fans      map[source.Kind]*fan
}

// NewSourceEvents returns the source events of one manager, heard by observers.
func NewSourceEvents(observers ...Observer) *SourceEvents {
	return &SourceEvents{observers: observers, fans: map[source.Kind]*fan{}}
}

// fan is one source type's handler and the mappers it feeds.
type fan struct {
	st        sourcecache.SourceType
	observers []predicate.Predicate
	mu        sync.Mutex
	sinks     []sink
	started   bool
	reg       toolscache.ResourceEventHandlerRegistration
}

type sink struct {
	preds  []predicate.Predicate
	mapper *SourceMapper
}

// Source is one workload controller's watch of st, read from informers: the events its
// predicates let through go to m. Every Source of a type is made before the manager starts;
// the first to start registers the type's one handler, which serves them all.
func (e *SourceEvents) Source(informers cache.Informers, st sourcecache.SourceType, m *SourceMapper, preds ...predicate.Predicate) crsource.Source {
	e.mu.Lock()
	f, ok := e.fans[st.Kind]
	if !ok {
		f = &fan{st: st}
		for _, o := range e.observers {
			f.observers = append(f.observers, o(st))
		}
		e.fans[st.Kind] = f
	}
	e.mu.Unlock()
	f.mu.Lock()
	f.sinks = append(f.sinks, sink{preds: preds, mapper: m})
	f.mu.Unlock()
	return &fanSource{fan: f, informers: informers}
}

type fanSource struct {
	fan       *fan
	informers cache.Informers
}

// Start registers the fan's handler on the type's informer, once.
func (s *fanSource) Start(ctx context.Context, _ WorkqueueOfRequests) error {
	f := s.fan
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.started {
		return nil
	}
	informer, err := s.informers.GetInformer(ctx, f.st.NewObject())
	if err != nil {
		return fmt.Errorf("watch %ss: %w", f.st.Kind, err)
	}
	reg, err := informer.AddEventHandler(f.handler())
	if err != nil {
		return fmt.Errorf("watch %ss: %w", f.st.Kind, err)
	}
	f.reg, f.started = reg, true
	return nil
}

// WaitForSync waits until the handler has heard the informer's first list.
func (s *fanSource) WaitForSync(ctx context.Context) error {
	return wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		s.fan.mu.Lock()
		reg := s.fan.reg
		s.fan.mu.Unlock()
		return reg != nil && reg.HasSynced(), nil
	})
}

func (s *fanSource) String() string { return fmt.Sprintf("source events of %ss", s.fan.st.Kind) }

func (f *fan) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			o, ok := obj.(client.Object)
			if !ok {
				return
			}
			e := event.CreateEvent{Object: o, IsInInitialList: initial}
			for _, p := range f.observers {
				p.Create(e)
			}
			f.each(func(s sink) {
				if all(s.preds, func(p predicate.Predicate) bool { return p.Create(e) }) {
					s.mapper.add(initial, o)
				}
			})
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, okOld := oldObj.(client.Object)
			n, okNew := newObj.(client.Object)
			if !okOld || !okNew {
				return
			}
			e := event.UpdateEvent{ObjectOld: o, ObjectNew: n}
			for _, p := range f.observers {
				p.Update(e)
			}
			f.each(func(s sink) {
				if all(s.preds, func(p predicate.Predicate) bool { return p.Update(e) }) {
					s.mapper.add(o.GetResourceVersion() == n.GetResourceVersion(), o, n)
				}
			})
		},
		DeleteFunc: func(obj any) {
			e := event.DeleteEvent{}
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				e.DeleteStateUnknown, obj = true, tomb.Obj
			}
			o, ok := obj.(client.Object)
			if !ok {
				return
			}
			e.Object = o
			for _, p := range f.observers {
				p.Delete(e)
			}
			f.each(func(s sink) {
				if all(s.preds, func(p predicate.Predicate) bool { return p.Delete(e) }) {
					s.mapper.add(false, o)
				}
			})
		},
	}
}

func (f *fan) each(fn func(sink)) {
	f.mu.Lock()
	sinks := f.sinks
	f.mu.Unlock()
	for _, s := range sinks {
		fn(s)
	}
}

func all(preds []predicate.Predicate, ok func(predicate.Predicate) bool) bool {
	for _, p := range preds {
		if !ok(p) {
			return false
		}
	}
	return true
}
