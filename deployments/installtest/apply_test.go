package installtest

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// applyAll server-side-applies every rendered object as the cluster admin, as `helm install`
// would create them: a namespaced object without a namespace goes to the release's.
func applyAll(ctx context.Context, objs []*unstructured.Unstructured, namespace string) error {
	for _, o := range objs {
		o = o.DeepCopy()
		mapping, err := admin.RESTMapper().RESTMapping(o.GroupVersionKind().GroupKind(), o.GroupVersionKind().Version)
		if err != nil {
			return fmt.Errorf("%s %s: its API is not installed on the test cluster: %w", o.GetKind(), o.GetName(), err)
		}
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace && o.GetNamespace() == "" {
			o.SetNamespace(namespace)
		}
		if err := admin.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("installtest"), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}
