package jobreplace

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/reloader-operator/reloader/internal/writer"
)

// admissible asks the API server, with a dry-run create, whether it would accept fresh,
// before the object it replaces is deleted: a replacement refused only after the delete
// would lose the Job. It returns the shape to create (see createAdmitted).
//
// The dry run uses the replacement's own name, still held by the old object. The API server
// runs admission (OwnerReferencesPermissionEnforcement, webhooks, policies, quota) before
// storage looks at the name, so a dry run that gets through admission ends in AlreadyExists,
// and one admission refuses ends in that refusal (TestDryRunAdmitsBeforeTheNameIsChecked
// checks this order on a real API server). A different name (generateName) would also
// avoid the conflict, but would escape the policies that match on the name.
func (w *Writer) admissible(ctx context.Context, fresh client.Object) (client.Object, error) {
	shape, err := createAdmitted(ctx, w.Client, fresh, true)
	if err == nil {
		return shape, nil
	}
	hint := ""
	if blocksOwners(fresh) {
		hint = "; with the OwnerReferencesPermissionEnforcement admission plugin (OpenShift's default), reloader needs update on the finalizers of the Job's owners (" + owners(fresh) + ")"
	}
	return nil, fmt.Errorf("the API server would refuse the replacement of %s %s, so it is not deleted: %w%s", w.Kind.Name(), fresh.GetName(), err, hint)
}

// createAdmitted creates obj (with dryRun, only asks whether the API server would) and returns
// the shape it was created in. An object that blocks its owners' deletion, refused as
// Forbidden, is tried again without blockOwnerDeletion: under OwnerReferencesPermission-
// Enforcement setting it needs update on each owner's finalizers, a right reloader may lack.
// The ownerReferences stay, so the garbage collector still deletes the Job with its owner;
// only a foreground delete of the owner no longer waits for it.
func createAdmitted(ctx context.Context, c client.Client, obj client.Object, dryRun bool) (client.Object, error) {
	err := createOnce(ctx, c, obj, dryRun)
	if !apierrors.IsForbidden(err) || !blocksOwners(obj) {
		return obj, err
	}
	lighter := withoutOwnerBlock(obj)
	if err2 := createOnce(ctx, c, lighter, dryRun); err2 != nil {
		return obj, err
	}
	log.FromContext(ctx).Info("the API server refuses blockOwnerDeletion on this Job's ownerReferences; creating it without (grant update on the owners' finalizers to keep it)",
		"job", obj.GetName(), "owners", owners(obj), "refused", err.Error(), "dryRun", dryRun)
	return lighter, nil
}

// createOnce creates obj, or dry-runs its create on a copy. A dry run refused only because
// the name is taken got through admission: see admissible.
func createOnce(ctx context.Context, c client.Client, obj client.Object, dryRun bool) error {
	if !dryRun {
		return c.Create(ctx, obj, client.FieldOwner(writer.FieldOwner))
	}
	err := c.Create(ctx, obj.DeepCopyObject().(client.Object), client.FieldOwner(writer.FieldOwner), client.DryRunAll)
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if atQuota(err, obj) {
		// The dry run adds a Job to those there; the replacement takes the place of one.
		log.FromContext(ctx).V(1).Info("the dry run is refused only by the namespace's quota on Jobs, which the replacement does not add to", "refused", err.Error())
		return nil
	}
	return err
}

// quotaRefusal parses the API server's ResourceQuota refusal: "exceeded quota: <quota>,
// requested: <r>=<n>,..., used: <r>=<n>,..., limited: <r>=<n>,..." (TestJobAtItsQuotaIsReplaced
// pins the wording).
var quotaRefusal = regexp.MustCompile(`exceeded quota: [^,]+, requested: (\S+), used: (\S+), limited: (\S+)$`)

// atQuota reports whether a dry-run create of obj was refused only because the namespace is
// at its quota of objects of obj's kind: every resource exceeded is the object count, used up
// to the limit and not beyond. Delete-then-create keeps the count, so the replacement fits once
// the old object's delete is counted (the quota controller does so on the delete; until then
// the create is retried). ResourceQuota is the last admission step: a refusal of its own means
// everything before it admitted the object. A namespace over its quota (the limit lowered
// since) is refused: the replacement would not fit after the delete either.
func atQuota(err error, obj client.Object) bool {
	if _, isJob := obj.(*batchv1.Job); !isJob || !apierrors.IsForbidden(err) {
		return false
	}
	m := quotaRefusal.FindStringSubmatch(err.Error())
	if m == nil {
		return false
	}
	const count = "count/jobs.batch"
	requested, used, limited := quantities(m[1]), quantities(m[2]), quantities(m[3])
	for name := range requested {
		u, okU := used[name]
		l, okL := limited[name]
		if name != count || !okU || !okL || u.Cmp(l) > 0 {
			return false
		}
	}
	return len(requested) > 0
}

// quantities parses "<resource>=<quantity>,..." as the quota refusal prints it.
func quantities(s string) map[string]resource.Quantity {
	out := map[string]resource.Quantity{}
	for _, kv := range strings.Split(s, ",") {
		name, v, ok := strings.Cut(kv, "=")
		q, err := resource.ParseQuantity(v)
		if ok && err == nil {
			out[name] = q
		}
	}
	return out
}

// blocksOwners reports whether obj sets blockOwnerDeletion on any owner.
func blocksOwners(obj client.Object) bool { return owners(obj) != "" }

// withoutOwnerBlock is a copy of obj whose ownerReferences block no owner's deletion.
func withoutOwnerBlock(obj client.Object) client.Object {
	c := obj.DeepCopyObject().(client.Object)
	refs := c.GetOwnerReferences()
	for i := range refs {
		refs[i].BlockOwnerDeletion = nil
	}
	c.SetOwnerReferences(refs)
	return c
}

// owners names the owners obj blocks the deletion of, as "kind/name".
func owners(obj client.Object) string {
	var out []string
	for _, ref := range obj.GetOwnerReferences() {
		if ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion {
			out = append(out, ref.Kind+"/"+ref.Name)
		}
	}
	return strings.Join(out, ", ")
}
