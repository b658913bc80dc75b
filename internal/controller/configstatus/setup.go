package configstatus

import (
	"context"
	"strings"
	"time"

	"github.com/reloader-operator/reloader/internal/report"
	"github.com/reloader-operator/reloader/internal/sourcecache"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	crsource "sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/controller/rollout"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/workload"
)

type workqueueOfRequests = workqueue.TypedRateLimitingInterface[reconcile.Request]

// ConfigStatusController names the controller, in logs and metrics.
const ConfigStatusController = "reloaderconfig-status"

// SetupWithManager registers the status controller. Like the reconcilers it writes, so it
// runs on the leader only. Nothing it writes wakes it: configs are watched for spec changes
// (generation), sources for content and label changes, workloads for creation, deletion,
// labels and spec, never status; each event goes to the configs of its namespace it concerns.
// Sources and workloads are watched from the first reconcile of a config on (lazywatch): with
// no ReloaderConfig, their events never reach this controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ConfigStatusController).
		// A config's change may end or start a conflict with the others of its namespace.
		Watches(&v1alpha1.ReloaderConfig{}, handler.EnqueueRequestsFromMapFunc(r.mapNamespaceConfigs),
			builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	for _, st := range r.Lookup.Sources {
		if st.Pool != nil {
			continue // configs choose ConfigMaps and Secrets only
		}
		r.lazy.Add(crsource.Kind(mgr.GetCache(), st.NewObject(), r.toConfigs(r.sourceConcerns(st)), sourcecache.SourceContentOrLabelsChanged()))
	}
	for _, kind := range r.Kinds {
		name := kind.Name()
		r.lazy.Add(crsource.Kind(mgr.GetCache(), kind.NewObject(), r.toConfigs(func(_ context.Context, objs []client.Object) func(*reloaderconfig.Compiled) bool {
			return func(c *reloaderconfig.Compiled) bool {
				for _, o := range objs {
					if c.TargetsWorkload(name, o) {
						return true
					}
				}
				return false
			}
			// Annotations too: holds begin and end with them (pacing, approvals, the
			// quarantine and wave records), and targets[].held follows.
		}), predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{})))
	}
	// Reloads reach the queue directly (Reloaded): keep it once the controller starts.
	b = b.WatchesRawSource(crsource.Func(func(_ context.Context, q workqueueOfRequests) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.queue = q
		return nil
	}))
	ctl, err := b.Build(r)
	if err != nil {
		return err
	}
	r.lazy.Bind(ctl)
	return nil
}

// Reloaded hears of a reload written (WorkloadReconciler.OnReload) and enqueues the configs
// that target the workload. It runs on the reconciler's goroutine and reads only the cache.
func (r *Reconciler) Reloaded(rl report.Reloaded) {
	r.Reloads.Add(rl.Kind, client.ObjectKeyFromObject(rl.Workload), rl.At, rl.Changes)
	r.enqueueTargeting(rl.Kind, rl.Workload)
}

// RolloutEnded hears how the rollout after a reload ended (Rollouts.OnOutcome: "complete" or
// "stalled", and why) and enqueues the configs that target the workload. It reads only the
// cache: the follower must not block.
func (r *Reconciler) RolloutEnded(o rollout.Outcome) {
	word := o.Outcome
	if word != "" {
		word = strings.ToUpper(word[:1]) + word[1:]
	}
	nn := types.NamespacedName{Namespace: o.Namespace, Name: o.Name}
	if !r.Reloads.SetRollout(o.Kind, nn, o.ReloadedAt, word, o.Reason) {
		return
	}
	k := r.kind(o.Kind)
	if k == nil {
		return
	}
	obj := k.NewObject()
	if err := r.Client.Get(context.Background(), nn, obj); err == nil {
		r.enqueueTargeting(o.Kind, obj)
	}
}

func (r *Reconciler) enqueueTargeting(kind string, obj client.Object) {
	r.mu.Lock()
	q := r.queue
	r.mu.Unlock()
	if q == nil {
		return // not started (not the leader): the first reconciles read the log anyway
	}
	configs, err := r.Lookup.NamespaceConfigs(context.Background(), obj.GetNamespace())
	if err != nil {
		return
	}
	for _, c := range configs {
		if c.TargetsWorkload(kind, obj) {
			q.AddAfter(reconcile.Request{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: c.Name}}, statusDelay)
		}
	}
}

// statusDelay gathers what one change sets off into one status write: a source's new
// content, the reloads of the config's targets within the coalescing window, their new
// generations. The queue holds a request once, so events within it make one reconcile.
const statusDelay = time.Second

// mapNamespaceConfigs enqueues every config of the object's namespace, those left out by its
// limits too (one more config can leave another out).
func (r *Reconciler) mapNamespaceConfigs(ctx context.Context, obj client.Object) []reconcile.Request {
	configs, left, err := r.Lookup.EveryNamespaceConfig(ctx, obj.GetNamespace())
	configs = append(configs, left...)
	if err != nil {
		log.FromContext(ctx).Error(err, "listing ReloaderConfigs")
		return nil
	}
	reqs := make([]reconcile.Request, len(configs))
	for i, c := range configs {
		reqs[i] = reconcile.Request{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: c.Name}}
	}
	return reqs
}

// concernsFunc returns, for the objects of one event (old and new on update), the test of
// whether a config is concerned.
type concernsFunc func(ctx context.Context, objs []client.Object) func(*reloaderconfig.Compiled) bool

// toConfigs enqueues, for each event, the configs of the object's namespace it concerns,
// after statusDelay.
func (r *Reconciler) toConfigs(concerns concernsFunc) handler.TypedEventHandler[client.Object, reconcile.Request] {
	enqueue := func(ctx context.Context, q workqueueOfRequests, objs ...client.Object) {
		ns := objs[0].GetNamespace()
		configs, left, err := r.Lookup.EveryNamespaceConfig(ctx, ns)
		configs = append(configs, left...)
		if err != nil {
			log.FromContext(ctx).Error(err, "listing ReloaderConfigs")
			return
		}
		if len(configs) == 0 {
			return
		}
		test := concerns(ctx, objs)
		for _, c := range configs {
			if test(c) {
				q.AddAfter(reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: c.Name}}, statusDelay)
			}
		}
	}
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[client.Object], q workqueueOfRequests) {
			enqueue(ctx, q, e.Object)
		},
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[client.Object], q workqueueOfRequests) {
			enqueue(ctx, q, e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[client.Object], q workqueueOfRequests) {
			enqueue(ctx, q, e.Object)
		},
		GenericFunc: func(ctx context.Context, e event.TypedGenericEvent[client.Object], q workqueueOfRequests) {
			enqueue(ctx, q, e.Object)
		},
	}
}

// sourceConcerns: a config is concerned by a source it names, selects (before or after a
// label change), or that one of its targets references while it has an auto rule.
func (r *Reconciler) sourceConcerns(st sourcecache.SourceType) concernsFunc {
	return func(ctx context.Context, objs []client.Object) func(*reloaderconfig.Compiled) bool {
		ns, id := objs[0].GetNamespace(), source.ID{Kind: st.Kind, Name: objs[0].GetName()}
		var users []resolvedTarget
		looked := false
		return func(c *reloaderconfig.Compiled) bool {
			for _, rule := range c.Rules {
				if rule.Kind != st.Kind {
					continue
				}
				switch {
				case rule.Name != "":
					if rule.Name == id.Name {
						return true
					}
				case rule.Selector != nil:
					for _, o := range objs {
						if rule.Selector.Matches(labels.Set(o.GetLabels())) {
							return true
						}
					}
				case rule.Auto:
					if !looked {
						users, looked = r.usersOf(ctx, ns, id), true
					}
					for _, u := range users {
						if c.TargetsWorkload(u.kind.Name(), u.obj) {
							return true
						}
					}
				}
			}
			return false
		}
	}
}

// usersOf finds, through the source index, the workloads that reference or name source id.
func (r *Reconciler) usersOf(ctx context.Context, ns string, id source.ID) []resolvedTarget {
	var out []resolvedTarget
	r.Lookup.Users(ctx, r.Kinds, ns, id, func(kind workload.Kind, o client.Object) {
		out = append(out, resolvedTarget{kind: kind, obj: o})
	})
	return out
}
