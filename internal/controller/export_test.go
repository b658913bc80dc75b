package controller

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReconcileCopy runs one reconcile as if the cache had returned obj: tests hand it a stale
// copy.
func (r *WorkloadReconciler) ReconcileCopy(ctx context.Context, obj client.Object) (string, error) {
	_, outcome, err := r.reconcileCopy(ctx, obj, r.windowKey(client.ObjectKeyFromObject(obj)), r.Now())
	return outcome, err
}
