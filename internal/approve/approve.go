// Package approve is `kubectl reloader approve`: it reads the digest of the content a
// workload's reload waits for, as reloader published it on the workload (else as `reloader
// explain` computes it), and writes the approval annotation naming it.
package approve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/approval"
	"github.com/reloader-operator/reloader/internal/explain"
	"github.com/reloader-operator/reloader/internal/workload"
)

// FieldManager is the field manager of the approval annotation written.
const FieldManager = "kubectl-reloader"

// ErrNothingPending says that the workload's reload waits for no approval now.
var ErrNothingPending = errors.New("no reload waits for approval")

// Approved is what an approval wrote.
type Approved struct {
	// Digest names the content approved; Sources are its changed sources ("configmap/app"),
	// when read through explain (none when the digest reloader published was approved).
	Digest  string
	Sources []string
	// Why is explain's account of the pending reload; Published, that the digest approved is
	// the one reloader published on the workload.
	Why       string
	Published bool
}

// Explainer makes the explainer that computes the pending content when reloader published
// none (a reloader of before PendingAnnotation): it reads reloader's hash key.
type Explainer func(context.Context) (*explain.Explainer, error)

// Approve approves the reload the workload kind namespace/name waits for, through c: it
// writes into the workload's approval annotation the digest reloader published on it
// (approval.PendingAnnotation: no read of reloader's hash key needed), or, when none is
// published, the digest of the pending content as explain computes it (the controller's own
// decision, which reads the key). want, when not empty, is the digest the user saw (in an
// Event, or explain): a different pending content is refused, not approved. The controller
// rolls only when the approval names the content due at that time, so a change that lands
// after this read is never rolled by this approval: it waits for its own.
func Approve(ctx context.Context, c client.Client, kind workload.Kind, namespace, name, want string, explainer Explainer) (Approved, error) {
	if want != "" {
		if _, err := approval.ParseApproved(want); err != nil {
			return Approved{}, fmt.Errorf("--digest: %w", err)
		}
	}
	obj := kind.NewObject()
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
		return Approved{}, fmt.Errorf("%s %s/%s: %w", kind.Name(), namespace, name, err)
	}
	var a Approved
	if v, ok := obj.GetAnnotations()[approval.PendingAnnotation]; ok {
		d, err := approval.ParsePending(v)
		if err != nil {
			return Approved{}, fmt.Errorf("%s %s/%s: %w", kind.Name(), namespace, name, err)
		}
		a = Approved{Digest: d, Why: "published by reloader in " + approval.PendingAnnotation, Published: true}
	} else {
		e, err := explainer(ctx)
		if err != nil {
			return Approved{}, err
		}
		w, err := e.Workload(ctx, kind, name)
		if err != nil {
			return Approved{}, err
		}
		n := w.Next
		if n.Approval == "" {
			return Approved{}, fmt.Errorf("%s %s/%s: %w; next: %s (%s)", kind.Name(), namespace, name, ErrNothingPending, n.Action, n.Why)
		}
		a = Approved{Digest: n.Approval, Sources: n.Sources, Why: n.Why}
	}
	if want != "" && want != a.Digest {
		return Approved{}, fmt.Errorf("%s %s/%s waits for approval of %s (%s), not of %s: its content changed since; nothing approved",
			kind.Name(), namespace, name, a.Digest, a.Why, want)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{approval.ApprovedAnnotation: a.Digest}}})
	if err != nil {
		return Approved{}, err
	}
	target := kind.NewObject()
	target.SetNamespace(namespace)
	target.SetName(name)
	if err := c.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch), &client.PatchOptions{FieldManager: FieldManager}); err != nil {
		return Approved{}, fmt.Errorf("approve %s %s/%s: %w", kind.Name(), namespace, name, err)
	}
	return a, nil
}
