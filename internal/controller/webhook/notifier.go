// Package webhook replaces reloads with notifications (--webhook-url): the Notifier.
package webhook

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reloader-operator/reloader/internal/lookup"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/notify"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/whatchanged/track"
	"github.com/reloader-operator/reloader/internal/workload"
)

// Notifier replaces reloads with notifications (--webhook-url): when a source changes, it
// POSTs what changed and which workloads would have reloaded, and writes nothing to the
// cluster. The hashes it compares against live in memory: the sources present at start-up are
// taken as they are, so a restart sends no burst of notifications, and changes made while it
// was down are not reported.
type Notifier struct {
	// Lookup reads the sources and finds the affected workloads.
	Lookup lookup.Lookup
	// Kinds are the workload kinds whose workloads a notification names.
	Kinds   []workload.Kind
	Events  reload.Events
	Send    func(context.Context, notify.Change) error
	Metrics *metrics.Metrics
	// Changes tell the keys of each change, for the document; nil names none.
	Changes *track.Changes
	Now     func() time.Time

	started time.Time
	mu      sync.Mutex
	seen    map[string]string
}

// SetupWithManager registers the notifier; the workload indexes must be registered first.
func (n *Notifier) SetupWithManager(mgr ctrl.Manager) error {
	n.started = n.Now()
	n.seen = map[string]string{}
	b := ctrl.NewControllerManagedBy(mgr).Named("webhook").
		WithOptions(controller.Options{NewQueue: metrics.NewQueue[reconcile.Request](n.Metrics.Queues, mgr.GetLogger())})
	for _, st := range n.Lookup.Sources {
		b = b.Watches(st.NewObject(), handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			name := n.Lookup.SourceName(st, o)
			if name == "" {
				return nil
			}
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: string(st.Kind) + "/" + name}}}
		}), builder.WithPredicates(n.Changes.Observe(st), sourcecache.SourceChanged(n.Lookup.Policy.Keys, n.Lookup.Configs != nil)))
	}
	return b.Complete(n)
}

// NotifierKind is the Kind the notifier reports its reconciles as, to metrics.Metrics.Hook;
// their Name is the source's kind and name ("configmap/app-config").
const NotifierKind = "webhook"

// Reconcile compares one source with the hash last seen and notifies on a change.
func (n *Notifier) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	defer func(started time.Time) {
		n.Metrics.Ended(metrics.Reconcile{Kind: NotifierKind, Namespace: req.Namespace, Name: req.Name, Outcome: metrics.OutcomeOf(err), Started: started})
	}(time.Now())
	kind, name, _ := strings.Cut(req.Name, "/")
	st, ok := n.Lookup.SourceType(source.Kind(kind))
	if !ok {
		return reconcile.Result{}, nil
	}
	s, exists, err := n.Lookup.Source(ctx, st, req.Namespace, name)
	if err != nil {
		return reconcile.Result{}, err
	}
	key := req.Namespace + "/" + req.Name
	n.mu.Lock()
	last, known := n.seen[key]
	n.mu.Unlock()

	change := notify.Change{Kind: st.Kind.Title(), Namespace: req.Namespace, Name: name, Hash: s.Hash(), Time: n.Now().UTC()}
	notifying := false
	switch {
	case !exists:
		change.Hash, change.Deleted = reload.Absent, true
		notifying = known && n.Events.OnDelete
	case !known:
		// New to this process: present at start-up, or created since.
		created := s.Object() != nil && s.Object().GetCreationTimestamp().After(n.started)
		change.Created = true
		notifying = created && n.Events.OnCreate
	default:
		notifying = last != s.Hash()
	}
	if notifying {
		selected, err := n.Lookup.NamespaceSelected(ctx, req.Namespace)
		if err != nil {
			return reconcile.Result{}, err
		}
		notifying = selected
	}
	if notifying {
		id := source.ID{Kind: st.Kind, Name: name}
		for _, kind := range n.Kinds {
			for _, o := range n.Lookup.Affected(ctx, kind, req.Namespace, id, s.Annotations(), s.Labels()) {
				change.Workloads = append(change.Workloads, notify.Workload{Kind: kind.Name(), Namespace: o.GetNamespace(), Name: o.GetName()})
			}
		}
		notifying = len(change.Workloads) > 0
	}
	if notifying {
		change.Report = n.Changes.Report(st, s, !known, last)
		err := n.Send(ctx, change)
		n.Metrics.Notified(metrics.TargetWebhook, err == nil)
		if err != nil {
			// Not marked as seen: the workqueue retries with backoff.
			return reconcile.Result{}, fmt.Errorf("notify change of %s %s/%s: %w", change.Kind, req.Namespace, name, err)
		}
		log.FromContext(ctx).Info("notified webhook instead of reloading", "source", kind+"/"+name, "hash", change.Hash, "workloads", len(change.Workloads))
	}
	n.mu.Lock()
	if exists {
		n.seen[key] = s.Hash()
	} else {
		delete(n.seen, key)
	}
	n.mu.Unlock()
	return reconcile.Result{}, nil
}
