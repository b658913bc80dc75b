package controller

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/approval"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
)

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
