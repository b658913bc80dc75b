package controller

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	crsource "sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/clientindex"
	"github.com/reloader-operator/reloader/internal/fair"
	"github.com/reloader-operator/reloader/internal/lookup"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
	"github.com/reloader-operator/reloader/internal/report"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
)

// mapping turns the events the controller watches (sources, namespaces, referenced
// Deployments, ReloaderConfigs, the first list) into requests for workloads of its kind,
// and makes its fair work queue. SetupWithManager makes one from the reconciler's fields.
type mapping struct {
	observer
	// key names a workload in the coalescing window (WorkloadReconciler.windowKey).
	key    func(types.NamespacedName) string
	report *report.Reporter
}

// newQueue takes turns between namespaces: one namespace with thousands of workloads queued
// delays another's by one turn each, not by its backlog.
func (m mapping) newQueue(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return metrics.Measure(m.report.Metrics.Queues, fair.NewQueue(name, rl, func(req reconcile.Request) string { return req.Namespace }))
}

// mapSource finds, through the index, the workloads of m.kind that a source event concerns,
// and opens or extends their coalescing window; a sourceMapper's workers call it, not the
// informer's handler (lookup.SourceMapper). Other workloads in the namespace are never
// looked at. A lookup that fails (a live one, in degraded mode) hands the event to retry,
// which brings it back here later (lookup.LiveRetry); nil retry: lookups read the cache.
//
// A recorded workload is queued when its window closes, at the priority a reload has then
// (its reconcile would only see the window open and come back then: one reconcile per
// change, not two), unless a ReloaderConfig of the namespace may give it a window of its own:
// those are queued at once, and their reconcile weighs the window they have.
func (m mapping) mapSource(st sourcecache.SourceType, retry *lookup.LiveRetry) lookup.MapFunc {
	return func(ctx context.Context, src client.Object) []lookup.Queued {
		id := source.ID{Kind: st.Kind, Name: st.SourceName(src)}
		if id.Name == "" {
			return nil
		}
		var annotations, labels map[string]string
		if st.Pool == nil {
			annotations, labels = src.GetAnnotations(), src.GetLabels()
		}
		var reqs []lookup.Queued
		// Asked once, and only of a source that concerns a recorded workload: most concern none.
		later := sync.OnceValue(func() bool { return m.windowAlike(ctx, src.GetNamespace()) })
		// A live lookup (degraded mode) sees at least the cluster of this change: every
		// workload created before it.
		ctx = clientindex.AtLeast(ctx, src.GetResourceVersion())
		scanned, failed := m.lookup().FindAffected(ctx, m.kind, src.GetNamespace(), id, annotations, labels, func(w client.Object) {
			nn := client.ObjectKeyFromObject(w)
			k := m.key(nn)
			m.window.Touch(k)
			q := lookup.Queued{Request: reconcile.Request{NamespacedName: nn}}
			if _, recorded := w.GetAnnotations()[reload.RecordAnnotation]; recorded && later() {
				if q.After = m.window.Wait(k); q.After > 0 {
					q.Priority = new(reloadPriority)
				}
			}
			reqs = append(reqs, q)
		})
		if retry != nil {
			// What was found is queued now; the lookup is made again in full later.
			if failed != nil {
				retry.Failed(ctx, src)
			} else {
				retry.Succeeded(src)
			}
		}
		m.report.Metrics.Upstream.WorkloadsScanned.WithLabelValues(m.kind.Name()).Add(float64(scanned))
		m.report.Metrics.Upstream.WorkloadsMatched.WithLabelValues(m.kind.Name()).Add(float64(len(reqs)))
		return reqs
	}
}

// windowAlike reports whether every workload of namespace ns has the flags' coalescing
// window: no ReloaderConfig there may set one of its own (none served, or none in ns). Not
// asked where the workloads are read live (degraded mode): the reconcile weighs it there.
func (m mapping) windowAlike(ctx context.Context, ns string) bool {
	if m.window.Quiet <= 0 || m.live() {
		return false
	}
	configs, err := m.lookup().NamespaceConfigs(ctx, ns)
	return err == nil && len(configs) == 0
}

// mapNamespace enqueues every workload of m.kind in a namespace whose labels changed, so that
// one that has just been selected catches up at once.
func (m mapping) mapNamespace(ctx context.Context, ns client.Object) []reconcile.Request {
	list := m.kind.NewList()
	if err := m.client.List(ctx, list, client.InNamespace(ns.GetName()), client.UnsafeDisableDeepCopy); err != nil {
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
func (m mapping) mapReferenced(ctx context.Context, d client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	for _, w := range m.lookup().Referencing(ctx, m.kind, d.GetNamespace(), d.GetName()) {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)})
	}
	return reqs
}

// configEvents enqueues the targets of a ReloaderConfig that is created, changed or deleted:
// they record what the new rules concern (without a reload), or forget what the old ones did.
func (m mapping) configEvents() handler.TypedEventHandler[client.Object, reconcile.Request] {
	enqueue := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], objs ...client.Object) {
		for _, o := range objs {
			cfg, ok := o.(*v1alpha1.ReloaderConfig)
			if !ok {
				continue
			}
			_ = m.lookup().EachTarget(ctx, m.kind, cfg.Namespace, reloaderconfig.Compile(cfg), func(w client.Object) {
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
			m.Configs.Forget(e.Object.GetUID())
			enqueue(ctx, q, e.Object)
		},
	}
}

// firstList queues every workload of m.kind once, when the controller starts.
func (m mapping) firstList() crsource.Source {
	return m.Unwatched.FirstList(m.kind, m.client)
}
