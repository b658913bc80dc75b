package controller

import (
	"context"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/fair"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/workload"
)

// SetupWithManager registers the controller for r.Kind. The indexes it reads (IndexWorkloads,
// and IndexPooled for pooled sources) must be registered first.
func (r *WorkloadReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := r.watchBaselines(mgr); err != nil {
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
		b = b.For(r.Kind.NewObject(), builder.WithPredicates(r.Baselines.notingCreations(), workloadChanged()))
	}
	for _, st := range r.Sources {
		b = b.Watches(st.NewObject(), handler.EnqueueRequestsFromMapFunc(r.mapSource(st)),
			builder.WithPredicates(r.Changes.Observe(st), r.observeFlaps(st), sourceChanged(r.Policy.Keys, r.Configs != nil), laterSources()))
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
	return b.Complete(r)
}

// newQueue takes turns between namespaces: one namespace with thousands of workloads queued
// delays another's by one turn each, not by its backlog.
func (r *WorkloadReconciler) newQueue(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return metrics.Measure(r.Metrics.Queues, fair.NewQueue(name, rl, func(req reconcile.Request) string { return req.Namespace }))
}

// mapSource finds, through the index, the workloads of r.Kind that a source event concerns,
// and opens or extends their coalescing window. Other workloads in the namespace are never
// looked at.
func (r *WorkloadReconciler) mapSource(st SourceType) handler.MapFunc {
	return func(ctx context.Context, src client.Object) []reconcile.Request {
		id := source.ID{Kind: st.Kind, Name: st.sourceName(src)}
		if id.Name == "" {
			return nil
		}
		var annotations, labels map[string]string
		if st.Pool == nil {
			annotations, labels = src.GetAnnotations(), src.GetLabels()
		}
		var reqs []reconcile.Request
		scanned := r.affected(ctx, src.GetNamespace(), id, annotations, labels, func(w client.Object) {
			nn := client.ObjectKeyFromObject(w)
			r.Window.Touch(r.windowKey(nn))
			reqs = append(reqs, reconcile.Request{NamespacedName: nn})
		})
		r.Metrics.Upstream.WorkloadsScanned.WithLabelValues(r.Kind.Name()).Add(float64(scanned))
		r.Metrics.Upstream.WorkloadsMatched.WithLabelValues(r.Kind.Name()).Add(float64(len(reqs)))
		return reqs
	}
}

// affected calls fn once for each workload of r.Kind in ns that source id concerns; annotations
// and labels are the source's own. It returns how many workloads the lookups found: through
// the index, and the targets of the ReloaderConfigs with a rule for the source.
func (r *WorkloadReconciler) affected(ctx context.Context, ns string, id source.ID, annotations, labels map[string]string, fn func(client.Object)) (scanned int) {
	// Listed once here, not once per workload found.
	configs, err := r.namespaceConfigs(ctx, ns)
	if err != nil {
		log.FromContext(ctx).Error(err, "reading ReloaderConfigs; their rules are left out of this lookup")
	}
	// A Rollout may be found twice, with its own template and with its Deployment's.
	visited, seen := map[string]bool{}, map[string]bool{}
	add := func(w client.Object, tpl *corev1.PodTemplateSpec) {
		if !visited[w.GetName()] {
			visited[w.GetName()] = true
			scanned++
		}
		if seen[w.GetName()] || !r.concerns(ctx, w, tpl, configs, reload.Candidate{ID: id, Annotations: annotations, Labels: labels}) {
			return
		}
		seen[w.GetName()] = true
		fn(w)
	}
	for _, value := range []string{id.String(), anyOf(id.Kind)} {
		_ = r.byIndex(ctx, r.Kind.NewList(), ns, value, func(w client.Object) {
			add(w, r.Kind.PodTemplate(w))
		})
	}
	if _, ok := r.Kind.(workload.Referencing); ok {
		// Rollouts that run a Deployment's template: through the Deployments using the source.
		_ = r.byIndex(ctx, &appsv1.DeploymentList{}, ns, id.String(), func(d client.Object) {
			tpl := &d.(*appsv1.Deployment).Spec.Template
			_ = r.byIndex(ctx, r.Kind.NewList(), ns, workloadRef(d.GetName()), func(w client.Object) { add(w, tpl) })
		})
	}
	r.configTargets(ctx, ns, configs, id, labels, func(w client.Object) { add(w, r.Kind.PodTemplate(w)) })
	return scanned
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
	_ = forEach(list, func(w client.Object) {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)})
	})
	return reqs
}

// mapReferenced enqueues the Rollouts that run a Deployment's template when that changes.
func (r *WorkloadReconciler) mapReferenced(ctx context.Context, d client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	_ = r.byIndex(ctx, r.Kind.NewList(), d.GetNamespace(), workloadRef(d.GetName()), func(w client.Object) {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)})
	})
	return reqs
}

func (r *WorkloadReconciler) byIndex(ctx context.Context, list client.ObjectList, ns, value string, fn func(client.Object)) error {
	if err := r.Client.List(ctx, list, client.InNamespace(ns), client.MatchingFields{IndexSources: value}, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing by source index", "kind", r.Kind.Name(), "value", value)
		return err
	}
	return forEach(list, fn)
}

// concerns decides whether candidate c (Referenced is filled in here) concerns workload w,
// whose pod template is tpl; configs are the ReloaderConfigs of w's namespace.
func (r *WorkloadReconciler) concerns(ctx context.Context, w client.Object, tpl *corev1.PodTemplateSpec, configs []*reloaderconfig.Compiled, c reload.Candidate) bool {
	rules, _ := r.Policy.ParseRules(w.GetAnnotations(), tpl.Annotations)
	rules.Configs = r.targeting(ctx, configs, w).Rules
	for _, ref := range source.Refs(&tpl.Spec) {
		if ref.ID == c.ID {
			c.Referenced = true
			break
		}
	}
	ok, _ := r.Policy.Concerns(&rules, c)
	return ok
}

func forEach(list client.ObjectList, fn func(client.Object)) error {
	return apimeta.EachListItem(list, func(o runtime.Object) error {
		if co, ok := o.(client.Object); ok {
			fn(co)
		}
		return nil
	})
}
