package installtest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/deployments/render"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// applyAll server-side-applies every rendered object as the cluster admin, as `helm install`
// would create them: a namespaced object without a namespace goes to the release's.
func applyAll(ctx context.Context, objs []*unstructured.Unstructured, namespace string) error {
	for _, o := range objs {
		o = o.DeepCopy()
		if err := defaultNamespace(o, namespace); err != nil {
			return err
		}
		if err := admin.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("installtest"), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

// defaultNamespace puts a namespaced object without a namespace in namespace, as Helm does
// with the release's.
func defaultNamespace(o *unstructured.Unstructured, namespace string) error {
	mapping, err := admin.RESTMapper().RESTMapping(o.GroupVersionKind().GroupKind(), o.GroupVersionKind().Version)
	if err != nil {
		return fmt.Errorf("%s %s: its API is not installed on the test cluster: %w", o.GetKind(), o.GetName(), err)
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace && o.GetNamespace() == "" {
		o.SetNamespace(namespace)
	}
	return nil
}

// reloaderContainer is the chart's Deployment and its reloader container.
func reloaderContainer(t *testing.T, objs []*unstructured.Unstructured) (*appsv1.Deployment, corev1.Container) {
	t.Helper()
	deployments := render.OfKind(objs, "Deployment")
	if len(deployments) != 1 {
		t.Fatalf("the chart rendered %d Deployments, want 1", len(deployments))
	}
	var d appsv1.Deployment
	testutil.Must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(deployments[0].Object, &d))
	cs := d.Spec.Template.Spec.Containers
	for _, c := range cs {
		if strings.Contains(c.Name, "reloader") {
			return &d, c
		}
	}
	if len(cs) != 1 {
		t.Fatalf("Deployment %s: no container named reloader among %d", d.Name, len(cs))
	}
	return &d, cs[0]
}

// haReplicas is the number of replicas the values set asks for.
func haReplicas(in install) int {
	r, _ := in.values["reloader"].(map[string]any)
	d, _ := r["deployment"].(map[string]any)
	if n, ok := d["replicas"].(int); ok {
		return n
	}
	return 1
}
