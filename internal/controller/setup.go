package controller

import (
	"context"
	"fmt"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
)

// SetupWithManager registers the source index and the controller for r.Kind.
func (r *WorkloadReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, r.Kind.NewObject(), IndexSources, sourceIndexer(r.Kind, r.Policy.Keys)); err != nil {
		return fmt.Errorf("index %s by source: %w", r.Kind.Name(), err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(strings.ToLower(r.Kind.Name())).
		For(r.Kind.NewObject(), builder.WithPredicates(workloadChanged())).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)})
	for _, st := range r.Sources {
		b = b.Watches(st.NewObject(), handler.EnqueueRequestsFromMapFunc(r.mapSource(st.Kind)),
			builder.WithPredicates(sourceChanged(r.Policy.Keys)))
	}
	return b.Complete(r)
}

// mapSource finds, through the index, the workloads of r.Kind that a source event concerns,
// and opens or extends their coalescing window. Other workloads in the namespace are never
// looked at.
func (r *WorkloadReconciler) mapSource(kind source.Kind) handler.MapFunc {
	return func(ctx context.Context, src client.Object) []reconcile.Request {
		id := source.ID{Kind: kind, Name: src.GetName()}
		var reqs []reconcile.Request
		seen := map[string]bool{}
		for _, value := range []string{id.String(), anyOf(kind)} {
			list := r.Kind.NewList()
			if err := r.Client.List(ctx, list, client.InNamespace(src.GetNamespace()),
				client.MatchingFields{IndexSources: value}, client.UnsafeDisableDeepCopy); err != nil {
				log.FromContext(ctx).Error(err, "listing workloads by source index", "kind", r.Kind.Name(), "source", id.String())
				continue
			}
			_ = forEach(list, func(w client.Object) {
				if seen[w.GetName()] || !r.concerns(w, id, src) {
					return
				}
				seen[w.GetName()] = true
				nn := client.ObjectKeyFromObject(w)
				r.Window.Touch(r.windowKey(nn))
				reqs = append(reqs, reconcile.Request{NamespacedName: nn})
			})
		}
		return reqs
	}
}

func (r *WorkloadReconciler) concerns(w client.Object, id source.ID, src client.Object) bool {
	tpl := r.Kind.PodTemplate(w)
	rules, _ := reload.ParseRules(r.Policy.Keys, w.GetAnnotations(), tpl.Annotations)
	referenced := false
	for _, ref := range source.Refs(&tpl.Spec) {
		if ref.ID == id {
			referenced = true
			break
		}
	}
	ok, _ := r.Policy.Concerns(&rules, reload.Candidate{ID: id, Annotations: src.GetAnnotations(), Referenced: referenced})
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
