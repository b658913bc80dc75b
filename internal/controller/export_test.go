package controller

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reloader-operator/reloader/internal/writer/jobreplace"
)

// ReconcileCopy runs one reconcile as if the cache had returned obj: tests hand it a stale
// copy.
func (r *WorkloadReconciler) ReconcileCopy(ctx context.Context, obj client.Object) (string, error) {
	_, outcome, err := r.reconcileCopy(ctx, obj, r.windowKey(client.ObjectKeyFromObject(obj)), r.Now())
	return outcome, err
}

// ReconcileCopyResult is ReconcileCopy with the result: when the reconcile comes back.
func (r *WorkloadReconciler) ReconcileCopyResult(ctx context.Context, obj client.Object) (reconcile.Result, string, error) {
	return r.reconcileCopy(ctx, obj, r.windowKey(client.ObjectKeyFromObject(obj)), r.Now())
}

// Replace replaces old by fresh as a reload of a Job does.
func (r *WorkloadReconciler) Replace(ctx context.Context, old, fresh client.Object) error {
	return r.jobs().Replace(ctx, old, fresh)
}

// Pending reports whether a replacement of nn is held, and whether it is marked to be dropped
// without creating anything.
func (r *WorkloadReconciler) Pending(nn types.NamespacedName) (held, drop bool) {
	return r.jobs().Pending(nn)
}

// FinishPending runs the pass of a reconcile that finishes the replacement held for nn.
func (r *WorkloadReconciler) FinishPending(ctx context.Context, nn types.NamespacedName) (reconcile.Result, error) {
	obj := r.Kind.NewObject()
	err := r.Client.Get(ctx, nn, obj)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	res, _, err := r.resume(ctx, nn, obj, err == nil)
	return res, err
}

// jobs is the Job writer of a reconciler of Jobs.
func (r *WorkloadReconciler) jobs() *jobreplace.Writer {
	return r.writeParts().write.(*jobreplace.Writer)
}
