package controller

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	crsource "sigs.k8s.io/controller-runtime/pkg/source"
)

// Unwatched describes what reloader's RBAC lets it read but not watch (degraded mode: an
// image swapped in under upstream's ClusterRole, which grants no watch on workloads). A kind
// named here has no informer: its reconciler reads each workload with a GET, a source change
// finds the workloads it concerns with a LIST of the namespace's workloads of that kind
// (the reconciler's Client must send both to the API server, applying IndexSources itself:
// clientindex.Split), and one LIST at start-up queues every workload for its first reconcile,
// as an informer's first list does. The decision is the same code; only the reads differ.
type Unwatched struct {
	// Kinds are the workload kinds, by name, read without watch.
	Kinds map[string]bool
	// Records is true when Job replacement records (ControllerRevisions) can't be watched:
	// a Job's reload can't be written down before its delete, so it fails with ReloadFail,
	// and none is finished after a restart.
	Records bool
	// Namespaces are where the start-up LIST looks: the watched namespaces, or all when
	// empty; Fields is the cache's namespace filter (--namespaces-to-ignore).
	Namespaces []string
	Fields     fields.Selector
}

// Has reports whether kind is read without watch.
func (u *Unwatched) Has(kind string) bool { return u != nil && u.Kinds[kind] }

// live reports whether r.Kind is read without watch.
func (r *WorkloadReconciler) live() bool { return r.Unwatched.Has(r.Kind.Name()) }

// firstList queues every workload of r.Kind once, when the controller starts: what an
// informer's first list does for a watched kind. A failed LIST is retried with backoff, up to
// a minute apart, until it succeeds or reloader stops.
func (r *WorkloadReconciler) firstList() crsource.Source {
	return crsource.Func(func(ctx context.Context, q workqueueOfRequests) error {
		go func() {
			logger := log.FromContext(ctx).WithValues("kind", r.Kind.Name())
			backoff := wait.Backoff{Duration: time.Second, Factor: 2, Steps: 7, Cap: time.Minute}
			_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
				n, err := r.queueAll(ctx, q)
				if err != nil {
					logger.Error(err, "listing workloads read without watch; retrying")
					return false, nil
				}
				logger.Info("listed workloads read without watch (degraded mode)", "workloads", n)
				return true, nil
			})
		}()
		return nil
	})
}

// queueAll lists r.Kind in each namespace of the scope and queues what it finds.
func (r *WorkloadReconciler) queueAll(ctx context.Context, q workqueueOfRequests) (int, error) {
	namespaces := r.Unwatched.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	var reqs []reconcile.Request
	for _, ns := range namespaces {
		opts := []client.ListOption{client.InNamespace(ns)}
		if r.Unwatched.Fields != nil && !r.Unwatched.Fields.Empty() {
			opts = append(opts, client.MatchingFieldsSelector{Selector: r.Unwatched.Fields})
		}
		list := r.Kind.NewList()
		if err := r.Client.List(ctx, list, opts...); err != nil {
			return 0, err
		}
		_ = forEach(list, func(w client.Object) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)})
		})
	}
	// Queued only once every namespace is listed: a retry queues nothing twice.
	for _, req := range reqs {
		q.Add(req)
	}
	return len(reqs), nil
}

type workqueueOfRequests = workqueue.TypedRateLimitingInterface[reconcile.Request]
