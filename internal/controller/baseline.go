package controller

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
)

// baselines hold, for workloads that have no record yet, the hash each source had before it
// changed, if it changed after reloader first saw it. At start-up every workload waits in the
// queue for its first reconcile, seconds to minutes on a large cluster; a change landing
// meanwhile is a change since reloader saw it, and must reload rather than become the record.
// Only the sources that changed are kept, as hash strings, and only until the workload's
// record is seen.
type baselines struct {
	mu sync.Mutex
	m  map[types.UID]reload.Record
}

func (b *baselines) get(uid types.UID) reload.Record {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.m[uid]
}

// before notes the hash a source had before its first change since the workload was seen;
// later changes keep the first.
func (b *baselines) before(uid types.UID, id source.ID, hash string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[types.UID]reload.Record{}
	}
	if b.m[uid] == nil {
		b.m[uid] = reload.Record{}
	}
	if _, ok := b.m[uid][id.String()]; !ok {
		b.m[uid][id.String()] = hash
	}
}

func (b *baselines) drop(uid types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.m, uid)
}

// watchBaselines hears every change of a source from the first list of the informers on, and
// notes its hash before the change on the workloads without record that it concerns. It is
// registered before the manager starts, so that no change between cache sync and the first
// reconciles goes unheard.
func (r *WorkloadReconciler) watchBaselines(mgr ctrl.Manager) error {
	ctx := context.Background() // informer handlers outlive any caller's context
	for _, st := range r.Sources {
		if st.Pool != nil {
			continue // a pooled source's hash spans many objects; its changes are rare at start-up
		}
		informer, err := mgr.GetCache().GetInformer(ctx, st.NewObject())
		if err != nil {
			return fmt.Errorf("watch %ss for baselines: %w", st.Kind, err)
		}
		if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, initial bool) {
				if o, ok := obj.(client.Object); ok && !initial {
					r.changedFrom(ctx, st, o, reload.Absent)
				}
			},
			UpdateFunc: func(oldObj, newObj any) {
				o, okOld := oldObj.(client.Object)
				n, okNew := newObj.(client.Object)
				if okOld && okNew && st.contentHash(o) != st.contentHash(n) {
					r.changedFrom(ctx, st, n, st.contentHash(o))
				}
			},
			DeleteFunc: func(obj any) {
				if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
					obj = tomb.Obj
				}
				if o, ok := obj.(client.Object); ok {
					r.changedFrom(ctx, st, o, st.contentHash(o))
				}
			},
		}); err != nil {
			return err
		}
	}
	informer, err := mgr.GetCache().GetInformer(ctx, r.Kind.NewObject())
	if err != nil {
		return fmt.Errorf("watch %ss for baselines: %w", r.Kind.Name(), err)
	}
	_, err = informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if o, ok := obj.(client.Object); ok {
				r.baselines.drop(o.GetUID())
			}
		},
	})
	return err
}

// changedFrom notes, on each workload without record that source object o concerns, the hash
// the source had before this change.
func (r *WorkloadReconciler) changedFrom(ctx context.Context, st SourceType, o client.Object, old string) {
	if selected, err := r.namespaceSelected(ctx, o.GetNamespace()); err != nil || !selected {
		return // a workload there is first seen when its namespace is selected
	}
	id := source.ID{Kind: st.Kind, Name: o.GetName()}
	r.affected(ctx, o.GetNamespace(), id, o.GetAnnotations(), func(w client.Object) {
		if _, recorded := w.GetAnnotations()[reload.RecordAnnotation]; recorded {
			return
		}
		r.baselines.before(w.GetUID(), id, old)
	})
}
