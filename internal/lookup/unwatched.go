package lookup

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

	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/workload"
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

// FirstList queues every workload of kind once, when the controller starts: what an
// informer's first list does for a watched kind, read through c. A failed LIST is retried
// with backoff, up to a minute apart, until it succeeds or reloader stops.
func (u *Unwatched) FirstList(kind workload.Kind, c client.Reader) crsource.Source {
	return crsource.Func(func(ctx context.Context, q WorkqueueOfRequests) error {
		go func() {
			logger := log.FromContext(ctx).WithValues("kind", kind.Name())
			backoff := wait.Backoff{Duration: time.Second, Factor: 2, Steps: 7, Cap: time.Minute}
			_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
				n, err := u.queueAll(ctx, kind, c, q)
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

// queueAll lists kind in each namespace of the scope and queues what it finds.
func (u *Unwatched) queueAll(ctx context.Context, kind workload.Kind, c client.Reader, q WorkqueueOfRequests) (int, error) {
	namespaces := u.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	var reqs []reconcile.Request
	for _, ns := range namespaces {
		opts := []client.ListOption{client.InNamespace(ns)}
		if u.Fields != nil && !u.Fields.Empty() {
			opts = append(opts, client.MatchingFieldsSelector{Selector: u.Fields})
		}
		list := kind.NewList()
		if err := c.List(ctx, list, opts...); err != nil {
			return 0, err
		}
		_ = sourcecache.ForEach(list, func(w client.Object) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)})
		})
	}
	// Queued only once every namespace is listed: a retry queues nothing twice.
	for _, req := range reqs {
		q.Add(req)
	}
	return len(reqs), nil
}

// WorkqueueOfRequests is a controller's work queue.
type WorkqueueOfRequests = workqueue.TypedRateLimitingInterface[reconcile.Request]
