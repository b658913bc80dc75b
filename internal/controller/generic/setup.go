package generic

import (
	"context"
	"strings"

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
	"github.com/reloader-operator/reloader/internal/fair"
	"github.com/reloader-operator/reloader/internal/lookup"
	"github.com/reloader-operator/reloader/internal/sourcecache"
)

// GenericTargetController names the controller, in logs and metrics.
const GenericTargetController = "reloaderconfig-generic"

// SetupWithManager registers the generic targets' controller: a config's spec change, or a
// content change of a source one of its generic targets' configs names, reconciles that config.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named(GenericTargetController).
		// The workloads' fair queue: one namespace's many configs delay another's by a turn.
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1),
			NewQueue: func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
				return fair.NewQueue(name, rl, func(req reconcile.Request) string { return req.Namespace })
			}}).
		For(&v1alpha1.ReloaderConfig{}, builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	// Namespaces and sources are watched from the first reconcile of a config on (lazywatch):
	// with no ReloaderConfig, their events never reach this controller.
	if r.Namespaces != nil {
		// A namespace selected anew catches up with the changes made meanwhile.
		r.lazy.Add(crsource.Kind[client.Object](mgr.GetCache(), &corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return r.configsIn(ctx, o.GetName())
		}), predicate.LabelChangedPredicate{}))
	}
	for _, st := range r.Sources {
		if st.Pool != nil {
			continue // configs choose ConfigMaps and Secrets only
		}
		kind := string(st.Kind)
		r.lazy.Add(crsource.Kind(mgr.GetCache(), st.NewObject(), handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return r.configsNaming(ctx, kind, o)
		}), sourcecache.SourceContentOrLabelsChanged()))
	}
	ctl, err := b.Build(r)
	if err != nil {
		return err
	}
	r.lazy.Bind(ctl)
	return nil
}

// configsIn are the configs of namespace ns with generic targets.
func (r *Reconciler) configsIn(ctx context.Context, ns string) []reconcile.Request {
	var out []reconcile.Request
	r.eachConfig(ctx, ns, func(cfg *v1alpha1.ReloaderConfig) {
		if len(cfg.Spec.GenericTargets) > 0 {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(cfg)})
		}
	})
	return out
}

// configsNaming are the configs of o's namespace with generic targets and a source naming o.
func (r *Reconciler) configsNaming(ctx context.Context, kind string, o client.Object) []reconcile.Request {
	var out []reconcile.Request
	r.eachConfig(ctx, o.GetNamespace(), func(cfg *v1alpha1.ReloaderConfig) {
		if len(cfg.Spec.GenericTargets) == 0 {
			return
		}
		for _, s := range cfg.Spec.Sources {
			if s.Name == o.GetName() && strings.EqualFold(s.Kind, kind) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(cfg)})
				return
			}
		}
	})
	return out
}

// eachConfig calls fn with each config of namespace ns, which it must not change
// (lookup.EachConfig: read in place, as this runs on every source event). A failed list is
// logged, and finds none.
func (r *Reconciler) eachConfig(ctx context.Context, ns string, fn func(*v1alpha1.ReloaderConfig)) {
	if err := lookup.EachConfig(ctx, r.Client, ns, fn); err != nil {
		log.FromContext(ctx).Error(err, "listing ReloaderConfigs")
	}
}
