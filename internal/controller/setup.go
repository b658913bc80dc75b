package controller

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	crsource "sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/baseline"
	"github.com/reloader-operator/reloader/internal/lookup"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/workload"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

// SetupWithManager registers the controller for r.Kind. The indexes it reads (IndexWorkloads,
// and IndexPooled for pooled sources) must be registered first.
func (r *WorkloadReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Baselines == nil {
		r.Baselines = baseline.New()
	}
	m := mapping{observer: r.observer(), key: r.windowKey, report: r.Report}
	lookupNow := func() lookup.Lookup { return r.observer().lookup() }
	if err := r.Baselines.Watch(mgr, baseline.Watcher{Kind: r.Kind, Lookup: lookupNow, Live: m.live()}); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(strings.ToLower(r.Kind.Name())).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1),
			NewQueue: m.newQueue, ReconciliationTimeout: r.ReconcileTimeout})
	if m.live() {
		// No watch: one list at start; later, only source changes bring a workload in.
		b = b.WatchesRawSource(m.firstList())
	} else {
		b = b.For(r.Kind.NewObject(), builder.WithPredicates(r.parts.echoes.filter(r.Baselines.Drop), r.Baselines.NotingCreations(), workloadChanged()))
	}
	if r.SourceEvents == nil {
		r.SourceEvents = lookup.NewSourceEvents(r.Changes.Observe, ObserveFlaps(r.Flaps, r.Now))
	}
	for _, st := range r.Sources {
		// The lookups are made off the informer's goroutine, in turn between namespaces; in
		// degraded mode, a failed one comes back through the same queue (lookup.LiveRetry).
		var retry *lookup.LiveRetry
		if m.live() {
			retry = lookup.NewLiveRetry()
		}
		mapper := lookup.NewSourceMapper(lookup.MapQueueName(r.Kind.Name(), st), m.mapSource(st, retry))
		b = b.WatchesRawSource(mapper.Source())
		if retry != nil {
			b = b.WatchesRawSource(retry.Source(mapper.Events()))
		}
		b = b.WatchesRawSource(r.SourceEvents.Source(mgr.GetCache(), st, mapper,
			sourcecache.SourceChanged(r.Policy.Keys, r.Configs != nil), sourcecache.LaterSources()))
	}
	if _, ok := r.Kind.(workload.Referencing); ok && !r.Unwatched.Has("Deployment") {
		b = b.Watches(&appsv1.Deployment{}, handler.EnqueueRequestsFromMapFunc(m.mapReferenced),
			builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	}
	if r.Namespaces != nil {
		b = b.Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(m.mapNamespace),
			builder.WithPredicates(predicate.LabelChangedPredicate{}))
	}
	if r.Configs != nil {
		b = b.Watches(&v1alpha1.ReloaderConfig{}, m.configEvents())
	}
	b = r.watchReplacements(b)
	for _, g := range r.Gates {
		if q, ok := g.(queued); ok {
			b = b.WatchesRawSource(q.Queue(r.Kind.Name())) // a gate that wakes held workloads
		}
	}
	return b.Complete(r)
}

// queued is a gate that queues held workloads again (the waves, when a blocker's rollout
// ends): it gets each kind's work queue through a source of its own.
type queued interface {
	Queue(kind string) crsource.Source
}

// relatedRef names a source in an Event's related reference by kind, namespace and name only.
// The recorder would copy the object's UID and resourceVersion into it, and Events are
// readable by anyone with the view role: a Secret's UID must not be published (it keyed
// Secret hashes before the install key, and tells a re-created Secret from the old one).
func (r *WorkloadReconciler) relatedRef(o client.Object) runtime.Object {
	if o == nil {
		return nil
	}
	gvk, err := r.Client.GroupVersionKindFor(o)
	if err != nil {
		return nil // an Event without a related object is still worth sending
	}
	return &corev1.ObjectReference{
		APIVersion: gvk.GroupVersion().String(),
		Kind:       gvk.Kind,
		Namespace:  o.GetNamespace(),
		Name:       o.GetName(),
	}
}

// SeriesRecorder returns rec with the regarding object of every Event named by reference,
// without its resourceVersion. client-go's broadcaster keys the Events it has sent on the
// whole reference and keeps each key for minutes; every reload moves the workload's
// resourceVersion, so each reload of a busy workload would be a new cached Event. Without
// it, repeated Events about one object aggregate into one Event series (count, last seen),
// and memory stays flat under churn. The UID stays: `kubectl describe` selects on it.
func SeriesRecorder(rec recorder.EventRecorder, scheme *runtime.Scheme) recorder.EventRecorder {
	return seriesRecorder{rec: rec, scheme: scheme}
}

type seriesRecorder struct {
	rec    recorder.EventRecorder
	scheme *runtime.Scheme
}

func (s seriesRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	s.rec.Eventf(s.ref(regarding), related, eventtype, reason, action, note, args...)
}

func (s seriesRecorder) AnnotatedEventf(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	s.rec.AnnotatedEventf(s.ref(regarding), related, annotations, eventtype, reason, action, note, args...)
}

// ref is o's reference without resourceVersion; o itself when it is no object of the scheme.
func (s seriesRecorder) ref(o runtime.Object) runtime.Object {
	obj, ok := o.(client.Object)
	if !ok {
		return o
	}
	gvk, err := apiutil.GVKForObject(obj, s.scheme)
	if err != nil {
		return o
	}
	return &corev1.ObjectReference{
		APIVersion: gvk.GroupVersion().String(),
		Kind:       gvk.Kind,
		Namespace:  obj.GetNamespace(),
		Name:       obj.GetName(),
		UID:        obj.GetUID(),
	}
}

// Work queue priorities (internal/fair: each namespace in turn, its highest first). A
// reload whose coalescing window is open comes back at reloadPriority when the window
// closes, ahead of everything else its namespace has queued; a first record waiting for its
// slot (--first-sight-rate) comes back at handler.LowPriority, as the informers' first list
// queues it, behind every namespace's changes. A worker that comes free takes a due reload
// before any first record; between namespaces, turns: one namespace's due reloads delay
// another's change by one turn, not by their number.
const reloadPriority = 100

const firstSightPriority = handler.LowPriority
