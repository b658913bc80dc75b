package writer

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/workload"
)

// Template is where a workload's pod template lives: in the workload itself, or in the
// Deployment an Argo Rollout refers to with workloadRef.
type Template struct {
	// Tpl is the pod template a reload writes into: the workload's own, or Owner's.
	Tpl *corev1.PodTemplateSpec
	// Owner is a copy of the referenced Deployment, holding the changes; nil for the
	// workload's own template. OwnerOriginal is that Deployment as read.
	Owner, OwnerOriginal *appsv1.Deployment
}

// Changed reports whether the referenced Deployment holds changes to write.
func (t Template) Changed() bool {
	return t.Owner != nil && !equality.Semantic.DeepEqual(t.Owner, t.OwnerOriginal)
}

// TemplateOf reads where obj's pod template lives; a workloadRef to a Deployment that is not
// there gives an empty template.
func TemplateOf(ctx context.Context, c client.Reader, kind workload.Kind, obj client.Object) (Template, error) {
	ref, ok := kind.(workload.Referencing)
	if !ok || ref.TemplateRef(obj) == "" {
		return Template{Tpl: kind.PodTemplate(obj)}, nil
	}
	d := &appsv1.Deployment{}
	err := c.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: ref.TemplateRef(obj)}, d)
	if apierrors.IsNotFound(err) {
		return Template{Tpl: &corev1.PodTemplateSpec{}}, nil
	}
	if err != nil {
		return Template{}, fmt.Errorf("get workloadRef Deployment: %w", err)
	}
	owner := d.DeepCopy()
	return Template{Tpl: &owner.Spec.Template, Owner: owner, OwnerOriginal: d}, nil
}

// Patch writes a reload as one patch of the workload (after one of the Deployment it refers
// to, when the template lives there): the writer of every kind but those re-created.
//
// A reload, or a first record, is written only onto the copy it was planned from (the patch
// tests what the decision read, guard.go): a reconcile that read a stale copy gets a conflict
// and plans again from the new one, so it never rolls a workload a second time, nor records
// over a record it did not see; a status write meanwhile is no conflict.
type Patch struct {
	Client client.Client
	Kind   workload.Kind
	// Keys name the rule annotations, whose absence a guarded patch tests.
	Keys reload.Keys
}

// Write implements Writer.
func (p *Patch) Write(ctx context.Context, obj, updated client.Object, in Input) error {
	if tw := in.Template; tw.Changed() {
		patch := client.StrategicMergeFrom(tw.OwnerOriginal)
		if len(in.Changes) > 0 {
			var err error
			if patch, err = GuardedOr(tw.OwnerOriginal, tw.Owner, client.StrategicMergeFrom(tw.OwnerOriginal, client.MergeFromWithOptimisticLock{}), p.Keys); err != nil {
				return err
			}
		}
		if err := p.Client.Patch(ctx, tw.Owner, patch, client.FieldOwner(FieldOwner)); err != nil {
			return fmt.Errorf("patch workloadRef Deployment %s: %w", tw.Owner.Name, GuardFailed(err, schema.GroupResource{Group: "apps", Resource: "deployments"}, tw.Owner.Name))
		}
	}
	patch := p.Kind.PatchFrom(obj)
	if p.guarded(obj, patch, in) {
		if patch.Type() == types.StrategicMergePatchType {
			patch = client.StrategicMergeFrom(obj, client.MergeFromWithOptimisticLock{})
		}
		var err error
		if patch, err = GuardedOr(obj, updated, patch, p.Keys); err != nil {
			return err
		}
	}
	err := p.Client.Patch(ctx, updated, patch, client.FieldOwner(FieldOwner))
	return GuardFailed(err, schema.GroupResource{Resource: p.Kind.Name()}, obj.GetName())
}

// Guarded reports whether Write writes obj's changes in only onto the copy obj itself (the
// guarded patch, or its resourceVersion): then the object it returns is obj with only those
// changes, and a status write meanwhile.
func (p *Patch) Guarded(obj client.Object, in Input) bool {
	return p.guarded(obj, p.Kind.PatchFrom(obj), in)
}

// guarded reports whether patch, obj's patch, is guarded: a reload or a first record is;
// custom kinds' merge patches replace whole lists, and so are guarded always.
func (p *Patch) guarded(obj client.Object, patch client.Patch, in Input) bool {
	_, recorded := obj.GetAnnotations()[reload.RecordAnnotation]
	return patch.Type() != types.StrategicMergePatchType || len(in.Changes) > 0 || !recorded
}
