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

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/baseline"
	"github.com/reloader-operator/reloader/internal/clientindex"
	"github.com/reloader-operator/reloader/internal/fair"
	"github.com/reloader-operator/reloader/internal/lookup"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/workload"
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
