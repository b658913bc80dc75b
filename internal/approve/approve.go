// Package approve is `kubectl reloader approve`: it reads, as `reloader explain` does, the
// content a workload's reload waits for, and writes the approval annotation naming it.
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
	// Digest names the content approved; Sources are its changed sources ("configmap/app").
	Digest  string
	Sources []string
	// Why is explain's account of the pending reload.
	Why string
}

// Approve approves the reload the workload kind/name (in e's namespace) waits for: it reads
// the pending content with e (the controller's own decision) and writes its digest into the
// workload's approval annotation, through c. want, when not empty, is the digest the user
// saw (in an Event, or explain): a different pending content is refused, not approved. The
// controller rolls only when the approval names the content due at that time, so a change
// that lands after this read is never rolled by this approval.
func Approve(ctx context.Context, e *explain.Explainer, c client.Client, kind workload.Kind, name, want string) (Approved, error) {
	if want != "" {
		if _, err := approval.ParseApproved(want); err != nil {
			return Approved{}, fmt.Errorf("--digest: %w", err)
		}
	}
	w, err := e.Workload(ctx, kind, name)
	if err != nil {
		return Approved{}, err
	}
	n := w.Next
	if n.Approval == "" {
		return Approved{}, fmt.Errorf("%s %s/%s: %w; next: %s (%s)", kind.Name(), w.Namespace, name, ErrNothingPending, n.Action, n.Why)
	}
	if want != "" && want != n.Approval {
		return Approved{}, fmt.Errorf("%s %s/%s waits for approval of %s (%s), not of %s: its content changed since; nothing approved",
			kind.Name(), w.Namespace, name, n.Approval, n.Why, want)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{approval.ApprovedAnnotation: n.Approval}}})
	if err != nil {
		return Approved{}, err
	}
	obj := kind.NewObject()
	obj.SetNamespace(w.Namespace)
	obj.SetName(name)
	if err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch), &client.PatchOptions{FieldManager: FieldManager}); err != nil {
		return Approved{}, fmt.Errorf("approve %s %s/%s: %w", kind.Name(), w.Namespace, name, err)
	}
	return Approved{Digest: n.Approval, Sources: n.Sources, Why: n.Why}, nil
}
