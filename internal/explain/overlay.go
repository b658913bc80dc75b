package explain

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// overlay reads the cluster as it would be once proposed ConfigMaps and Secrets are applied:
// a Get or List of one of them returns the proposed object in place of the live one, or
// beside the live ones when it does not exist yet. Everything else is read as it is. The
// controller's decision code runs on it unchanged, so `reloader plan` decides as the
// controller will.
type overlay struct {
	client.Client
	proposed map[overlayKey]client.Object
}

type overlayKey struct {
	kind      string
	namespace string
	name      string
}

func keyOf(o runtime.Object, ns, name string) (overlayKey, bool) {
	switch o.(type) {
	case *corev1.ConfigMap, *corev1.ConfigMapList:
		return overlayKey{"ConfigMap", ns, name}, true
	case *corev1.Secret, *corev1.SecretList:
		return overlayKey{"Secret", ns, name}, true
	}
	return overlayKey{}, false
}

func newOverlay(c client.Client, objs []client.Object) *overlay {
	o := &overlay{Client: c, proposed: map[overlayKey]client.Object{}}
	for _, obj := range objs {
		if k, ok := keyOf(obj, obj.GetNamespace(), obj.GetName()); ok {
			o.proposed[k] = obj
		}
	}
	return o
}

func (o *overlay) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if k, ok := keyOf(obj, key.Namespace, key.Name); ok {
		if p := o.proposed[k]; p != nil {
			copyInto(p, obj)
			return nil
		}
	}
	return o.Client.Get(ctx, key, obj, opts...)
}

func (o *overlay) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := o.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	if _, ok := keyOf(list, "", ""); !ok || lo.Limit > 0 {
		return nil // not a source, or an access check: the live answer stands
	}
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return err
	}
	placed := map[overlayKey]bool{}
	out := items[:0]
	for _, item := range items {
		obj := item.(client.Object)
		k, _ := keyOf(list, obj.GetNamespace(), obj.GetName())
		p := o.proposed[k]
		switch {
		case p == nil:
			out = append(out, item)
		case lo.LabelSelector == nil || lo.LabelSelector.Matches(labels.Set(p.GetLabels())):
			out = append(out, p.DeepCopyObject())
			placed[k] = true
		default:
			placed[k] = true // relabelled out of the selection: gone from it
		}
	}
	for k, p := range o.proposed {
		kk, _ := keyOf(list, k.namespace, k.name)
		if kk != k || placed[k] || (lo.Namespace != "" && lo.Namespace != k.namespace) {
			continue
		}
		if lo.LabelSelector == nil || lo.LabelSelector.Matches(labels.Set(p.GetLabels())) {
			out = append(out, p.DeepCopyObject())
		}
	}
	return apimeta.SetList(list, out)
}

// copyInto sets obj, of the same type as p, to a copy of p.
func copyInto(p, obj client.Object) {
	switch v := obj.(type) {
	case *corev1.ConfigMap:
		p.(*corev1.ConfigMap).DeepCopyInto(v)
	case *corev1.Secret:
		p.(*corev1.Secret).DeepCopyInto(v)
	}
}
