package rollout

import (
	"context"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/workload"
)

// SetupWithManager adds, per kind that has a rollout, a small controller that reads the
// status of the followed workloads. It shares the reload controllers' informers; its
// predicate lets through only the objects followed, so the status churn of the others never
// reaches a queue, and never the reload controllers, whose predicate drops status changes.
func (t *Rollouts) SetupWithManager(mgr ctrl.Manager, kinds []workload.Kind) error {
	for _, kind := range kinds {
		if _, ok := kind.(workload.Progressing); !ok {
			continue
		}
		name := kind.Name()
		followed := predicate.NewPredicateFuncs(func(o client.Object) bool { return t.follows(name, o) })
		err := ctrl.NewControllerManagedBy(mgr).
			Named(strings.ToLower(name)+"-rollout").
			For(kind.NewObject(), builder.WithPredicates(followed)).
			WatchesRawSource(source.Func(func(_ context.Context, q workqueueOf) error {
				t.setQueue(name, q)
				return nil
			})).
			Complete(&rolloutFollower{rollouts: t, client: mgr.GetClient(), reader: mgr.GetAPIReader(), kind: kind})
		if err != nil {
			return err
		}
	}
	return nil
}

// FollowerKind is the Kind the follower of kind's rollouts reports its reconciles as, to
// metrics.Metrics.Hook.
func FollowerKind(kind string) string { return kind + "/rollout" }

// rolloutFollower reconciles the followed workloads of one kind: it reads their status.
type rolloutFollower struct {
	rollouts *Rollouts
	client   client.Client
	// reader reads a followed workload whose cached copy has no status (workload.SlimTransform).
	reader client.Reader
	kind   workload.Kind
}

// Reconcile implements reconcile.Reconciler.
func (f *rolloutFollower) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	defer f.rollouts.Metrics.Ended(metrics.Reconcile{Kind: FollowerKind(f.kind.Name()), Namespace: req.Namespace, Name: req.Name, Started: time.Now()})
	obj := f.kind.NewObject()
	if err := f.client.Get(ctx, req.NamespacedName, obj); err != nil {
		if client.IgnoreNotFound(err) == nil {
			f.rollouts.forget(followKey{f.kind.Name(), req.NamespacedName}, nil)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if f.rollouts.statusMissing(f.kind.Name(), obj) {
		// The cache dropped the status before the rollout was followed; the next status
		// change will be kept, but the last may have passed already.
		if err := f.reader.Get(ctx, req.NamespacedName, obj); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	return f.rollouts.check(ctx, f.kind, obj), nil
}
