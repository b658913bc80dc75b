package controller

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"k8s.io/client-go/util/workqueue"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
	"github.com/reloader-operator/reloader/internal/source"
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
}

func (r *WorkloadReconciler) settingsFor(o reload.Overrides) settings {
	s := settings{strategy: r.Strategy, runCronJobs: r.Behaviour.RunCronJobs,
		recreateFinishedJobs: r.Behaviour.RecreateFinishedJobs, window: o.CoalesceWindow, pausePeriod: o.PausePeriod}
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

// configsFor returns what the ReloaderConfigs targeting obj add to its decision.
func (r *WorkloadReconciler) configsFor(ctx context.Context, obj client.Object) (reloaderconfig.Merged, error) {
	if r.Configs == nil {
		return reloaderconfig.Merged{}, nil
	}
	var targeting []*reloaderconfig.Compiled
	err := r.eachConfig(ctx, obj.GetNamespace(), func(c *reloaderconfig.Compiled) {
		if c.TargetsWorkload(r.Kind.Name(), obj) {
			targeting = append(targeting, c)
		}
	})
	if err != nil {
		return reloaderconfig.Merged{}, err
	}
	m := reloaderconfig.Merge(targeting)
	for _, c := range m.Conflicts {
		log.FromContext(ctx).V(1).Info("conflicting ReloaderConfigs", "conflict", c.String())
	}
	return m, nil
}

// eachConfig calls fn with every ReloaderConfig of namespace ns, compiled.
func (r *WorkloadReconciler) eachConfig(ctx context.Context, ns string, fn func(*reloaderconfig.Compiled)) error {
	list := &v1alpha1.ReloaderConfigList{}
	if err := r.Client.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("list ReloaderConfigs in %s: %w", ns, err)
	}
	for i := range list.Items {
		fn(r.Configs.Get(&list.Items[i]))
	}
	return nil
}

// configTargets calls fn with each workload of r.Kind in ns that a ReloaderConfig with a rule
// for the source id (labelled srcLabels) targets. Auto rules are left out: the source index
// already finds the workloads that reference the source.
func (r *WorkloadReconciler) configTargets(ctx context.Context, ns string, id source.ID, srcLabels map[string]string, fn func(client.Object)) {
	if r.Configs == nil {
		return
	}
	_ = r.eachConfig(ctx, ns, func(c *reloaderconfig.Compiled) {
		for _, rule := range c.Rules {
			if rule.Kind != id.Kind || rule.Auto || (rule.Name != "" && rule.Name != id.Name) ||
				(rule.Selector != nil && !rule.Selector.Matches(labels.Set(srcLabels))) {
				continue
			}
			r.eachTarget(ctx, ns, c, fn)
			return
		}
	})
}

// eachTarget calls fn with each workload of r.Kind in ns that config c targets.
func (r *WorkloadReconciler) eachTarget(ctx context.Context, ns string, c *reloaderconfig.Compiled, fn func(client.Object)) {
	for _, t := range c.Targets {
		if t.Kind != r.Kind.Name() {
			continue
		}
		if t.Name != "" {
			obj := r.Kind.NewObject()
			if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: t.Name}, obj); err == nil {
				fn(obj)
			}
			continue
		}
		list := r.Kind.NewList()
		if err := r.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: t.Selector}, client.UnsafeDisableDeepCopy); err != nil {
			log.FromContext(ctx).Error(err, "listing the targets of a ReloaderConfig", "config", c.Name)
			continue
		}
		_ = forEach(list, fn)
	}
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
			r.eachTarget(ctx, cfg.Namespace, reloaderconfig.Compile(cfg), func(w client.Object) {
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
