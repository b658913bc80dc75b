package controller

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/workload"
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
}

func (r *WorkloadReconciler) settingsFor(o reload.Overrides) settings {
	s := settings{strategy: r.Strategy, runCronJobs: r.Behaviour.RunCronJobs,
		recreateFinishedJobs: r.Behaviour.RecreateFinishedJobs, window: o.CoalesceWindow, pausePeriod: o.PausePeriod,
		minReloadInterval: o.MinReloadInterval, reloadWindow: o.ReloadWindow}
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
	configs, err := r.namespaceConfigs(ctx, obj.GetNamespace())
	if err != nil {
		return reloaderconfig.Merged{}, err
	}
	return r.targeting(ctx, configs, obj), nil
}

// targeting merges those of configs, all of obj's namespace, that target obj.
func (r *WorkloadReconciler) targeting(ctx context.Context, configs []*reloaderconfig.Compiled, obj client.Object) reloaderconfig.Merged {
	var targeting []*reloaderconfig.Compiled
	for _, c := range configs {
		if c.TargetsWorkload(r.Kind.Name(), obj) {
			targeting = append(targeting, c)
		}
	}
	m := reloaderconfig.Merge(targeting)
	for _, c := range m.Conflicts {
		log.FromContext(ctx).V(1).Info("conflicting ReloaderConfigs", "conflict", c.String())
	}
	return m
}

// namespaceConfigs returns every ReloaderConfig of namespace ns, compiled; none when the
// ReloaderConfig API is not read.
func (r *WorkloadReconciler) namespaceConfigs(ctx context.Context, ns string) ([]*reloaderconfig.Compiled, error) {
	if r.Configs == nil {
		return nil, nil
	}
	list := &v1alpha1.ReloaderConfigList{}
	if err := r.Client.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list ReloaderConfigs in %s: %w", ns, err)
	}
	out := make([]*reloaderconfig.Compiled, len(list.Items))
	for i := range list.Items {
		out[i] = r.Configs.Get(&list.Items[i])
	}
	return out, nil
}

// configTargets calls fn with each workload of r.Kind in ns that one of configs (those of ns)
// with a rule for the source id (labelled srcLabels) targets. Auto rules are left out: the
// source index already finds the workloads that reference the source.
func (r *WorkloadReconciler) configTargets(ctx context.Context, ns string, configs []*reloaderconfig.Compiled, id source.ID, srcLabels map[string]string, fn func(client.Object)) {
	for _, c := range configs {
		for _, rule := range c.Rules {
			if rule.Kind != id.Kind || rule.Auto || (rule.Name != "" && rule.Name != id.Name) ||
				(rule.Selector != nil && !rule.Selector.Matches(labels.Set(srcLabels))) {
				continue
			}
			r.eachTarget(ctx, ns, c, fn)
			break
		}
	}
}

// eachTarget calls fn with each workload of r.Kind in ns that config c targets.
func (r *WorkloadReconciler) eachTarget(ctx context.Context, ns string, c *reloaderconfig.Compiled, fn func(client.Object)) {
	for _, t := range c.Targets {
		if t.Kind != r.Kind.Name() {
			continue
		}
		if _, err := targetsOf(ctx, r.Client, r.Kind, ns, t, fn); err != nil {
			log.FromContext(ctx).Error(err, "reading the targets of a ReloaderConfig", "config", c.Name)
		}
	}
}

// targetsOf calls fn with each workload of kind in ns that target t chooses, from the cache,
// and returns how many there were: a named target that does not exist is none, not an error.
// The workload reconcilers and the status controller both resolve targets through it.
func targetsOf(ctx context.Context, c client.Reader, kind workload.Kind, ns string, t reloaderconfig.Target, fn func(client.Object)) (int, error) {
	if t.Name != "" {
		obj := kind.NewObject()
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: t.Name}, obj)
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("get %s %s/%s: %w", kind.Name(), ns, t.Name, err)
		}
		fn(obj)
		return 1, nil
	}
	list := kind.NewList()
	if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: t.Selector}, client.UnsafeDisableDeepCopy); err != nil {
		return 0, fmt.Errorf("list %ss in %s: %w", kind.Name(), ns, err)
	}
	found := 0
	err := forEach(list, func(obj client.Object) { found++; fn(obj) })
	return found, err
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
