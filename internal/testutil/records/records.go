// Package records tells tests whether reloader has recorded a workload, on it or in its ledger.
package records

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/ledger"
	"github.com/reloader-operator/reloader/internal/reload"
)

// Recorded reports whether reloader has recorded w, as read through c: its record annotation,
// or its entry in the ledger of first records kept in ledgerNamespace (reloader's own; ""
// looks at the annotation only).
func Recorded(ctx context.Context, c client.Reader, ledgerNamespace string, w client.Object) (bool, error) {
	if _, ok := w.GetAnnotations()[reload.RecordAnnotation]; ok || ledgerNamespace == "" {
		return ok, nil
	}
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ledgerNamespace, Name: ledger.Name(w.GetNamespace())}, cm)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil && ledger.Holds(cm, w.GetUID()), err
}
