package controller

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
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
