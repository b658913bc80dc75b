package controller

import (
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/reloader-operator/reloader/internal/cachemem/shrink"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/writer"
	"github.com/reloader-operator/reloader/internal/writer/evict"
)

// Each write of a workload comes back through the watch as an update, and reconciling it
// found nothing to do after a full read of the workload's sources: a third of the reconciles
// of a reload. echoes keeps, per workload written, the resourceVersion of the copy the write
// was planned from (from) and of the object it returned (to); the update from one to the
// other is the write alone, and is not queued.
//
// Only a write applied onto the copy read itself is kept (writer.Patch.Guarded: it tests the
// uid, the generation, the annotations and labels read, and the absence of reloader's own),
// and only when the object it returned holds nothing besides what was written (an annotation
// or a label added meanwhile, which the guard lets through): the echo then shows the
// reconciler nothing it has not decided from. Any other update, one in between included, is
// queued as before; the watch delivers each version in turn, so an echo that is not the next
// update of its workload (from a copy the handlers had not heard of yet) is simply queued.
type echoes struct {
	mu sync.Mutex
	m  map[types.UID]echo
}

type echo struct{ from, to string }

// expect notes that uid was written from resourceVersion from to to.
func (e *echoes) expect(uid types.UID, from, to string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[types.UID]echo{}
	}
	e.m[uid] = echo{from: from, to: to}
}

// heard reports whether the update from old to updated is a write noted by expect, and
// forgets the write once its version is heard.
func (e *echoes) heard(old, updated client.Object) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	w, ok := e.m[updated.GetUID()]
	if !ok || w.to != updated.GetResourceVersion() {
		return false
	}
	shrink.Delete(&e.m, updated.GetUID())
	return w.from == old.GetResourceVersion()
}

// forget drops what is noted of uid (the workload is deleted).
func (e *echoes) forget(uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	shrink.Delete(&e.m, uid)
}

// len is the number of writes not yet heard back.
func (e *echoes) len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.m)
}

// predicate drops the echoes of the reconciler's writes; the baselines of a workload whose
// first record comes back are dropped, as its reconcile would have.
func (r *WorkloadReconciler) echoFilter() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(ev event.UpdateEvent) bool {
			if ev.ObjectOld == nil || ev.ObjectNew == nil || !r.echoes.heard(ev.ObjectOld, ev.ObjectNew) {
				return true
			}
			if _, ok := ev.ObjectNew.GetAnnotations()[reload.RecordAnnotation]; ok {
				r.Baselines.Drop(ev.ObjectNew.GetUID())
			}
			return false
		},
		DeleteFunc: func(ev event.DeleteEvent) bool {
			if ev.Object != nil {
				r.echoes.forget(ev.Object.GetUID())
			}
			return true
		},
	}
}

// echoWant is what a write of a workload is meant to leave on it, for expectEcho.
type echoWant struct {
	uid         types.UID
	from        string
	annotations map[string]string
	labels      map[string]string
}

// wantEcho says, before updated (planned from obj) is written, whether its echo may be
// dropped: a plain patch (not a re-created Job, a CronJob's run, a workloadRef's
// Deployment, an evict restart), guarded, of a watched kind. nil: the echo is queued.
func (r *WorkloadReconciler) wantEcho(obj, updated client.Object, w seen, changes []reload.Change) *echoWant {
	p, ok := r.writeParts().write.(*writer.Patch)
	if !ok || w.tw.Owner != nil || w.restart != evict.Rollout || r.observer().live() ||
		!p.Guarded(obj, writer.Input{Changes: changes}) {
		return nil
	}
	want := &echoWant{uid: obj.GetUID(), from: obj.GetResourceVersion(), annotations: maps.Clone(updated.GetAnnotations())}
	if r.Configs != nil {
		// Labels choose the targets of ReloaderConfigs; the cache keeps them only then.
		want.labels = obj.GetLabels()
	}
	return want
}

// expectEcho notes the write that returned written, when it holds what was meant (want)
// and no more.
func (r *WorkloadReconciler) expectEcho(want *echoWant, written client.Object) {
	if want == nil || written.GetUID() != want.uid || !written.GetDeletionTimestamp().IsZero() ||
		!sameBesides(want.annotations, written.GetAnnotations(), writer.RevisionAnnotation, corev1.LastAppliedConfigAnnotation) ||
		r.Configs != nil && !maps.Equal(want.labels, written.GetLabels()) {
		return
	}
	r.echoes.expect(want.uid, want.from, written.GetResourceVersion())
}
