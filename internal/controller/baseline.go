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
	// handled is each source's hash as of the last event the handlers below processed. An
	// informer updates its store before it tells its handlers, so a reconcile can read a
	// change the handlers have not heard yet; the hash here is then the one before it.
	handled map[string]string
	regs    []toolscache.ResourceEventHandlerRegistration
}

func handledKey(ns string, id source.ID) string { return ns + "/" + id.String() }

func (b *baselines) setHandled(ns string, id source.ID, hash string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.handled == nil {
		b.handled = map[string]string{}
	}
	b.handled[handledKey(ns, id)] = hash
}

func (b *baselines) forgetHandled(ns string, id source.ID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.handled, handledKey(ns, id))
}

// synced reports whether the handlers have heard every source of the first list: before
// that, no baseline can be told from the store.
func (b *baselines) synced() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range b.regs {
		if !r.HasSynced() {
			return false
		}
	}
	return true
}

// of returns the baseline of a workload without record: the hashes noted by the handlers,
// and, for a source whose newest change the handlers have not heard yet, the hash before it.
func (b *baselines) of(uid types.UID, ns string, current map[source.ID]string) reload.Record {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out reload.Record
	for id, hash := range current {
		key := id.String()
		old, noted := b.m[uid][key]
		if !noted {
			h, heard := b.handled[handledKey(ns, id)]
			if !heard || h == hash {
				continue
			}
			old = h
		}
		if out == nil {
			out = reload.Record{}
		}
		out[key] = old
	}
	for key, old := range b.m[uid] {
		if out == nil {
			out = reload.Record{}
		}
		if _, ok := out[key]; !ok {
			out[key] = old
		}
	}
	return out
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
		reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, initial bool) {
				if o, ok := obj.(client.Object); ok {
					if !initial {
						r.changedFrom(ctx, st, o, reload.Absent)
					}
					r.baselines.setHandled(o.GetNamespace(), source.ID{Kind: st.Kind, Name: o.GetName()}, st.contentHash(o))
				}
			},
			UpdateFunc: func(oldObj, newObj any) {
				o, okOld := oldObj.(client.Object)
				n, okNew := newObj.(client.Object)
				if !okOld || !okNew {
					return
				}
				if st.contentHash(o) != st.contentHash(n) {
					r.changedFrom(ctx, st, n, st.contentHash(o))
				}
				r.baselines.setHandled(n.GetNamespace(), source.ID{Kind: st.Kind, Name: n.GetName()}, st.contentHash(n))
			},
			DeleteFunc: func(obj any) {
				if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
					obj = tomb.Obj
				}
				if o, ok := obj.(client.Object); ok {
					r.changedFrom(ctx, st, o, st.contentHash(o))
					r.baselines.forgetHandled(o.GetNamespace(), source.ID{Kind: st.Kind, Name: o.GetName()})
				}
			},
		})
		if err != nil {
			return err
		}
		r.baselines.mu.Lock()
		r.baselines.regs = append(r.baselines.regs, reg)
		r.baselines.mu.Unlock()
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
	r.affected(ctx, o.GetNamespace(), id, o.GetAnnotations(), o.GetLabels(), func(w client.Object) {
		if _, recorded := w.GetAnnotations()[reload.RecordAnnotation]; recorded {
			return
		}
		r.baselines.before(w.GetUID(), id, old)
	})
}
