package jobreplace

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reloader-operator/reloader/internal/report"
)

// pendingJob is a replacement written down (replacements.go) but not yet known to be created.
type pendingJob struct {
	// obj is the object to create: the one this process wrote down, or one read from a record
	// and checked (trusted); nil for a record only seen through the cache.
	obj client.Object
	// replaces is the UID of the object replaced: for a record seen only through the cache,
	// what it says, which decides only whether it is dropped; nothing is created from a
	// record before it is checked (trusted).
	replaces types.UID
	// record is the UID of the record in the cluster that holds it.
	record types.UID
	// drop marks a replacement whose object someone else deleted first, and whose record
	// reloader could not delete then: it is never created, only its record dropped on the
	// next pass. Held in memory only: a process that starts before the record is gone knows
	// nothing of it and, finding the record signed, would create the object. That residual is
	// accepted: it takes both a delete racing reloader's and the API server refusing the
	// record's delete for every retry, and then this process stopping before the next pass.
	drop bool
}

// pendingJobs are the replacement records, by the name of the object they replace: the ones
// this process wrote and the ones its watch found, left by an earlier leader.
type pendingJobs struct {
	mu sync.Mutex
	m  map[types.NamespacedName]pendingJob
}

func (p *pendingJobs) get(nn types.NamespacedName) (pendingJob, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	j, ok := p.m[nn]
	return j, ok
}

func (p *pendingJobs) put(nn types.NamespacedName, j pendingJob) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[types.NamespacedName]pendingJob{}
	}
	p.m[nn] = j
}

// learn notes a record seen through the cache, unless it is the one already held, or the
// replacement held is known whole (obj, or drop): that one is this process's own, or read
// back and checked, and what the cache shows of another record, which anyone may have
// written, never displaces it. A record replacing it under the same name is checked on its
// own when the one held is done (trusted).
func (p *pendingJobs) learn(nn types.NamespacedName, j pendingJob) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cur, ok := p.m[nn]; ok && (cur.record == j.record || cur.obj != nil || cur.drop) {
		return
	}
	if p.m == nil {
		p.m = map[types.NamespacedName]pendingJob{}
	}
	p.m[nn] = j
}

// done forgets the replacement of nn held in record; a newer one is kept.
func (p *pendingJobs) done(nn types.NamespacedName, record types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if j, ok := p.m[nn]; ok && j.record == record {
		delete(p.m, nn)
	}
}

// Replace asks the API server whether it would take the replacement (admissible), writes it
// down, deletes the old object if it is still the one read, and creates the replacement.
// Whatever stops it half way, the record lets createReplacement finish: the create happens
// once, and never for an object someone else deleted first.
func (w *Writer) Replace(ctx context.Context, old, fresh client.Object) error {
	nn := client.ObjectKeyFromObject(old)
	fresh, err := w.admissible(ctx, fresh)
	if err != nil {
		return err
	}
	p, err := w.writeRecord(ctx, old, fresh)
	if err != nil {
		return err
	}
	uid, rv := old.GetUID(), old.GetResourceVersion()
	err = w.Client.Delete(ctx, old, client.Preconditions{UID: &uid, ResourceVersion: &rv},
		client.PropagationPolicy(metav1.DeletePropagationBackground))
	switch {
	case apierrors.IsNotFound(err):
		// Deleted by someone else since it was read: theirs to re-create, not reloader's.
		// The record must not outlive this: with the name free, it would re-create the object.
		// Until it is gone, the replacement is held, marked never to be created; the error has
		// the reconcile retried with backoff, and the next pass drops the record.
		dropErr := retry.OnError(retry.DefaultRetry, func(error) bool { return true }, func() error { return w.dropRecord(ctx, nn, p) })
		if dropErr != nil {
			p.drop = true
			w.jobs.put(nn, p)
		}
		return errors.Join(fmt.Errorf("%s %s was deleted meanwhile; not re-created: %w", w.Kind.Name(), nn.Name, err), dropErr)
	case apierrors.IsConflict(err):
		// Changed since read; the retry reads the new one.
		return errors.Join(fmt.Errorf("delete for replacement: %w", err), w.dropRecord(ctx, nn, p))
	case err != nil:
		// The delete may or may not have happened; the record decides on the next pass.
		return fmt.Errorf("delete for replacement: %w", err)
	}
	if _, err := createAdmitted(ctx, w.Client, fresh.DeepCopyObject().(client.Object), false); err != nil {
		return fmt.Errorf("re-create after delete (kept, retrying): %w", err)
	}
	w.forgetRecord(ctx, nn, p)
	return nil
}

// forgetRecord drops the record of a replacement that is done. A record that can't be deleted
// now is harmless: the next pass, of this process or the next, finds the object created and
// drops it then.
func (w *Writer) forgetRecord(ctx context.Context, nn types.NamespacedName, p pendingJob) {
	if err := w.dropRecord(ctx, nn, p); err != nil {
		log.FromContext(ctx).Info("replacement done; its record is left for a later pass", "error", err.Error())
	}
}

// createReplacement finishes a replacement that was written down and not seen done: after a
// failed create, or left by a process that died between the delete and the create; one whose
// object is still there, never deleted, is dropped. current is what the cache holds under the
// name, if anything.
func (w *Writer) createReplacement(ctx context.Context, nn types.NamespacedName, p pendingJob, current client.Object, exists bool) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	if p.drop {
		// Its object was deleted by someone else: never created, whatever the record says.
		if err := w.dropRecord(ctx, nn, p); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{RequeueAfter: time.Millisecond}, nil
	}
	if exists && current.GetUID() == p.replaces && current.GetDeletionTimestamp().IsZero() && w.APIReader != nil {
		// The cache may not have seen the delete yet (a retry right after a refused create
		// comes within milliseconds): ask the API server before taking the old object as
		// never deleted and dropping the record.
		live := w.Kind.NewObject()
		err := w.APIReader.Get(ctx, nn, live)
		if err != nil && !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		current, exists = live, err == nil
	}
	switch {
	case exists && current.GetUID() != p.replaces:
		// Created meanwhile, by this replacement or by someone else: done either way (and a
		// record of another object would create nothing). Look at the new object again, now
		// without the record.
		return reconcile.Result{RequeueAfter: time.Millisecond}, w.dropRecord(ctx, nn, p)
	case exists && current.GetDeletionTimestamp().IsZero():
		// The old object was never deleted (the process stopped first, before or after
		// signing the record, or the delete failed): drop the record, signed or not, since
		// nothing is created from it; the next pass reloads the object afresh if it still
		// needs it.
		logger.Info("replacement was not started; reloading afresh")
		return reconcile.Result{RequeueAfter: time.Millisecond}, w.dropRecord(ctx, nn, p)
	case exists:
		// Deleted, still finalizing.
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	if p.obj == nil {
		// Seen through the cache only, and the object is gone: the record would create it.
		// It is read from the API server and checked first.
		var ok bool
		var err error
		if p, ok, err = w.trusted(ctx, nn, p); err != nil || !ok {
			// Nothing trusted to finish: the object is reconciled as any other.
			return reconcile.Result{RequeueAfter: time.Millisecond}, err
		}
	}
	fresh, err := createAdmitted(ctx, w.Client, p.obj.DeepCopyObject().(client.Object), false)
	switch {
	case err == nil:
		w.Report.Recreated(w.Kind.Name(), nn.Namespace)
		logger.Info("re-created a replaced object", "replaces", string(p.replaces))
		w.Report.Event(fresh, nil, false, report.ReasonReloaded, "Reload", fmt.Sprintf("Re-created %s %s with the new configuration", w.Kind.Name(), nn.Name))
		w.forgetRecord(ctx, nn, p)
		return reconcile.Result{}, nil
	case apierrors.IsAlreadyExists(err):
		// The old object is still there, or a replacement exists that the cache has not
		// shown yet; the next pass tells which, by UID, at the top of this function.
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	w.Report.Event(p.obj, nil, true, report.ReasonReloadFail, "Reload", fmt.Sprintf("%s %s was deleted for a reload but could not be re-created; retrying: %v", w.Kind.Name(), nn.Name, err))
	return reconcile.Result{}, fmt.Errorf("re-create %s: %w", nn, err)
}
