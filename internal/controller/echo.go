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
//
// The echo may arrive before the write's answer. The handler never waits for it (it is shared
// by every namespace): the first update from the copy written from, heard while the write is in
// flight, is dropped on trust and kept (held); when the answer comes, a held update that is not
// the version the write returned (or any, when the write failed or returned more than was
// written) has the writing reconcile requeue the workload, so nothing heard is lost.
type echoes struct {
	mu sync.Mutex
	m  map[types.UID]echo
}

// echo is one write of a workload: from the version written from, to the version it
// returned (once it has: inFlight false), held the version of an update dropped on trust while
// it was in flight.
type echo struct {
	from, to, held string
	inFlight       bool
}

// begin notes that uid is being written from resourceVersion from; end must follow.
func (e *echoes) begin(uid types.UID, from string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[types.UID]echo{}
	}
	e.m[uid] = echo{from: from, inFlight: true}
}

// end notes the version uid's write returned: "" when it failed, or holds more than was
// written. It reports whether an update dropped while the write was in flight turned out not
// to be its echo: the workload must be reconciled again.
func (e *echoes) end(uid types.UID, to string) (requeue bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	w, ok := e.m[uid]
	if !ok || !w.inFlight {
		return false
	}
	if w.held != "" || to == "" {
		shrink.Delete(&e.m, uid)
		return w.held != "" && w.held != to
	}
	w.inFlight, w.to = false, to
	e.m[uid] = w
	return false
}

// heard reports whether the update from old to updated is a write's echo (or, while the write
// is in flight, may be: end settles it), and forgets the write once its version is heard.
func (e *echoes) heard(old, updated client.Object) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	uid := updated.GetUID()
	w, ok := e.m[uid]
	switch {
	case !ok:
		return false
	case w.inFlight:
		if w.held != "" || old.GetResourceVersion() != w.from {
			return false
		}
		w.held = updated.GetResourceVersion()
		e.m[uid] = w
		return true
	case w.to != updated.GetResourceVersion():
		return false
	}
	shrink.Delete(&e.m, uid)
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

// filter is the predicate that drops the echoes of the reconciler's writes; the baselines of
// a workload whose first record comes back are dropped (dropBaseline), as its reconcile would
// have.
func (e *echoes) filter(dropBaseline func(types.UID)) predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(ev event.UpdateEvent) bool {
			if ev.ObjectOld == nil || ev.ObjectNew == nil || !e.heard(ev.ObjectOld, ev.ObjectNew) {
				return true
			}
			if _, ok := ev.ObjectNew.GetAnnotations()[reload.RecordAnnotation]; ok {
				dropBaseline(ev.ObjectNew.GetUID())
			}
			return false
		},
		DeleteFunc: func(ev event.DeleteEvent) bool {
			if ev.Object != nil {
				e.forget(ev.Object.GetUID())
			}
			return true
		},
	}
}

// echoWant is what a write of a workload is meant to leave on it, for settle.
type echoWant struct {
	uid         types.UID
	from        string
	annotations map[string]string
	// labels are compared when checkLabels: ReloaderConfigs choose their targets by them, and
	// the cache keeps them only then.
	labels      map[string]string
	checkLabels bool
}

// echoable says whether the echo of a write of obj with write, the kind's writer, may be
// dropped: a plain patch (not a re-created Job, a CronJob's run, a workloadRef's Deployment,
// an evict restart), guarded, of a watched kind (live: read from the API server, not watched).
func echoable(write writer.Writer, obj client.Object, w seen, changes []reload.Change, live bool) bool {
	p, ok := write.(*writer.Patch)
	return ok && w.tw.Owner == nil && w.restart == evict.Rollout && !live && p.Guarded(obj, writer.Input{Changes: changes})
}

// expect notes, before updated (planned from obj) is written, what the write is meant to
// leave; settle must follow.
func (e *echoes) expect(obj, updated client.Object, checkLabels bool) *echoWant {
	want := &echoWant{uid: obj.GetUID(), from: obj.GetResourceVersion(), annotations: maps.Clone(updated.GetAnnotations()), checkLabels: checkLabels}
	if checkLabels {
		want.labels = obj.GetLabels()
	}
	e.begin(want.uid, want.from)
	return want
}

// settle notes the end of the write expected as want (nil: none): written is what it
// returned, unless it failed. Its echo is dropped only when written holds what was meant and
// no more. It reports whether the workload must be reconciled again (end).
func (e *echoes) settle(want *echoWant, written client.Object, failed bool) bool {
	if want == nil {
		return false
	}
	to := ""
	if !failed && written.GetUID() == want.uid && written.GetDeletionTimestamp().IsZero() &&
		sameBesides(want.annotations, written.GetAnnotations(), writer.RevisionAnnotation, corev1.LastAppliedConfigAnnotation) &&
		(!want.checkLabels || maps.Equal(want.labels, written.GetLabels())) {
		to = written.GetResourceVersion()
	}
	return e.end(want.uid, to)
}
