package controller

import (
	"context"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	crsource "sigs.k8s.io/controller-runtime/pkg/source"

	"time"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/baseline"
	"github.com/reloader-operator/reloader/internal/clientindex"
	"github.com/reloader-operator/reloader/internal/fair"
	"github.com/reloader-operator/reloader/internal/lookup"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/workload"

	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/reloader-operator/reloader/internal/approval"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
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
	if err := r.Baselines.Watch(mgr, baseline.Watcher{Kind: r.Kind, Lookup: r.lookup, Live: r.live()}); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(strings.ToLower(r.Kind.Name())).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1),
			NewQueue: r.newQueue, ReconciliationTimeout: r.ReconcileTimeout})
	if r.live() {
		// No watch: one list at start; later, only source changes bring a workload in.
		b = b.WatchesRawSource(r.firstList())
	} else {
		b = b.For(r.Kind.NewObject(), builder.WithPredicates(r.Baselines.NotingCreations(), workloadChanged()))
	}
	if r.SourceEvents == nil {
		r.SourceEvents = lookup.NewSourceEvents(r.Changes.Observe, ObserveFlaps(r.Flaps, r.Now))
	}
	for _, st := range r.Sources {
		// The lookups are made off the informer's goroutine, in turn between namespaces; in
		// degraded mode, a failed one comes back through the same queue (lookup.LiveRetry).
		var retry *lookup.LiveRetry
		if r.live() {
			retry = lookup.NewLiveRetry()
		}
		mapper := lookup.NewSourceMapper(lookup.MapQueueName(r.Kind.Name(), st), r.mapSource(st, retry))
		b = b.WatchesRawSource(mapper.Source())
		if retry != nil {
			b = b.WatchesRawSource(retry.Source(mapper.Events()))
		}
		b = b.WatchesRawSource(r.SourceEvents.Source(mgr.GetCache(), st, mapper,
			sourcecache.SourceChanged(r.Policy.Keys, r.Configs != nil), sourcecache.LaterSources()))
	}
	if _, ok := r.Kind.(workload.Referencing); ok && !r.Unwatched.Has("Deployment") {
		b = b.Watches(&appsv1.Deployment{}, handler.EnqueueRequestsFromMapFunc(r.mapReferenced),
			builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	}
	if r.Namespaces != nil {
		b = b.Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.mapNamespace),
			builder.WithPredicates(predicate.LabelChangedPredicate{}))
	}
	if r.Configs != nil {
		b = b.Watches(&v1alpha1.ReloaderConfig{}, r.configEvents())
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

// newQueue takes turns between namespaces: one namespace with thousands of workloads queued
// delays another's by one turn each, not by its backlog.
func (r *WorkloadReconciler) newQueue(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return metrics.Measure(r.Report.Metrics.Queues, fair.NewQueue(name, rl, func(req reconcile.Request) string { return req.Namespace }))
}

// mapSource finds, through the index, the workloads of r.Kind that a source event concerns,
// and opens or extends their coalescing window; a sourceMapper's workers call it, not the
// informer's handler (lookup.SourceMapper). Other workloads in the namespace are never
// looked at. A lookup that fails (a live one, in degraded mode) hands the event to retry,
// which brings it back here later (lookup.LiveRetry); nil retry: lookups read the cache.
func (r *WorkloadReconciler) mapSource(st sourcecache.SourceType, retry *lookup.LiveRetry) handler.MapFunc {
	return func(ctx context.Context, src client.Object) []reconcile.Request {
		id := source.ID{Kind: st.Kind, Name: st.SourceName(src)}
		if id.Name == "" {
			return nil
		}
		var annotations, labels map[string]string
		if st.Pool == nil {
			annotations, labels = src.GetAnnotations(), src.GetLabels()
		}
		var reqs []reconcile.Request
		// A live lookup (degraded mode) sees at least the cluster of this change: every
		// workload created before it.
		ctx = clientindex.AtLeast(ctx, src.GetResourceVersion())
		scanned, failed := r.lookup().FindAffected(ctx, r.Kind, src.GetNamespace(), id, annotations, labels, func(w client.Object) {
			nn := client.ObjectKeyFromObject(w)
			r.Window.Touch(r.windowKey(nn))
			reqs = append(reqs, reconcile.Request{NamespacedName: nn})
		})
		if retry != nil {
			// What was found is queued now; the lookup is made again in full later.
			if failed != nil {
				retry.Failed(ctx, src)
			} else {
				retry.Succeeded(src)
			}
		}
		r.Report.Metrics.Upstream.WorkloadsScanned.WithLabelValues(r.Kind.Name()).Add(float64(scanned))
		r.Report.Metrics.Upstream.WorkloadsMatched.WithLabelValues(r.Kind.Name()).Add(float64(len(reqs)))
		return reqs
	}
}

// mapNamespace enqueues every workload of r.Kind in a namespace whose labels changed, so that
// one that has just been selected catches up at once.
func (r *WorkloadReconciler) mapNamespace(ctx context.Context, ns client.Object) []reconcile.Request {
	list := r.Kind.NewList()
	if err := r.Client.List(ctx, list, client.InNamespace(ns.GetName()), client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing workloads of a relabelled namespace", "namespace", ns.GetName())
		return nil
	}
	var reqs []reconcile.Request
	_ = sourcecache.ForEach(list, func(w client.Object) {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)})
	})
	return reqs
}

// mapReferenced enqueues the Rollouts that run a Deployment's template when that changes.
func (r *WorkloadReconciler) mapReferenced(ctx context.Context, d client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	for _, w := range r.lookup().Referencing(ctx, r.Kind, d.GetNamespace(), d.GetName()) {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)})
	}
	return reqs
}

// settings are the flags' behaviour for one workload, with the overrides of the
// ReloaderConfigs that target it applied.
type settings struct {
	strategy             reload.Strategy
	runCronJobs          bool
	recreateFinishedJobs bool
	// window is the coalescing window when a config sets one; nil keeps the flag's.
	window *time.Duration
	// pausePeriod is the pause period when a config sets one and the workload's own
	// annotation does not.
	pausePeriod *time.Duration
	// minReloadInterval and reloadWindow pace the reloads when a config sets them and the
	// workload's own annotations do not.
	minReloadInterval *time.Duration
	reloadWindow      string
	// mode is a config's mode (approval.go); "" keeps --mode.
	mode approval.Mode
	// waves is a config's opt-in to health-gated waves (waves.go); after are the workloads
	// its targets' after lists name.
	waves bool
	after []string
}

func (r *WorkloadReconciler) settingsFor(o reload.Overrides) settings {
	s := settings{strategy: r.Strategy, runCronJobs: r.Behaviour.RunCronJobs,
		recreateFinishedJobs: r.Behaviour.RecreateFinishedJobs, window: o.CoalesceWindow, pausePeriod: o.PausePeriod,
		minReloadInterval: o.MinReloadInterval, reloadWindow: o.ReloadWindow, mode: approval.Mode(o.Mode),
		waves: o.Waves != nil && *o.Waves, after: o.After}
	if o.Strategy != nil {
		s.strategy = o.Strategy
	}
	if o.RunCronJobs != nil {
		s.runCronJobs = *o.RunCronJobs
	}
	if o.RecreateFinishedJobs != nil {
		s.recreateFinishedJobs = *o.RecreateFinishedJobs
	}
	return s
}

// configEvents enqueues the targets of a ReloaderConfig that is created, changed or deleted:
// they record what the new rules concern (without a reload), or forget what the old ones did.
func (r *WorkloadReconciler) configEvents() handler.TypedEventHandler[client.Object, reconcile.Request] {
	enqueue := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], objs ...client.Object) {
		for _, o := range objs {
			cfg, ok := o.(*v1alpha1.ReloaderConfig)
			if !ok {
				continue
			}
			_ = r.lookup().EachTarget(ctx, r.Kind, cfg.Namespace, reloaderconfig.Compile(cfg), func(w client.Object) {
				q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)})
			})
		}
	}
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.Object)
		},
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() {
				enqueue(ctx, q, e.ObjectOld, e.ObjectNew)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.Configs.Forget(e.Object.GetUID())
			enqueue(ctx, q, e.Object)
		},
	}
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

// Work queue priorities (internal/fair serves the highest first). A reload whose coalescing
// window is open comes back at reloadPriority when the window closes, ahead of everything
// else queued; a first record waiting for its slot (--first-sight-rate) comes back at
// handler.LowPriority, as the informers' first list queues it, behind changes. A worker
// that comes free takes the highest first: a due reload waits for at most the writes in
// flight, never for the first records queued.
const reloadPriority = 100

const firstSightPriority = handler.LowPriority
