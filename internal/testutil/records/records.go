// Package records tells tests what record reloader keeps of a workload: on the workload, or
// in its ledger of first records (internal/ledger), wherever that is kept.
package records

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/ledger"
	"github.com/reloader-operator/reloader/internal/reload"
)

// Of returns w's record as reloader wrote it, read through c: its record annotation, else
// its entry in a ledger of first records (any namespace: reloader's own, or the fallback of
// a run outside a cluster). w is as read last; ok is false when reloader has recorded none.
func Of(ctx context.Context, c client.Reader, w client.Object) (rec string, ok bool, err error) {
	if v, ok := w.GetAnnotations()[reload.RecordAnnotation]; ok {
		return v, true, nil
	}
	var cms corev1.ConfigMapList
	if err := c.List(ctx, &cms, client.MatchingLabels{ledger.Label: w.GetNamespace()}); err != nil {
		return "", false, err
	}
	for i := range cms.Items {
		if cms.Items[i].Name != ledger.Name(w.GetNamespace()) {
			continue
		}
		if rec, ok := ledger.RecordIn(&cms.Items[i], w.GetUID()); ok {
			return rec, true, nil
		}
	}
	return "", false, nil
}

// Recorded reports whether reloader has recorded w (Of).
func Recorded(ctx context.Context, c client.Reader, w client.Object) (bool, error) {
	_, ok, err := Of(ctx, c, w)
	return ok, err
}
