package chart_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/reloader-operator/reloader/deployments/render"
	"github.com/reloader-operator/reloader/internal/localcluster"
)

// An upgrade from a release whose CRD came from crds/ (an earlier version of this chart) or
// from kubectl must not fail on it: Helm refuses to take over an object another owner has.
// Against a real API server, the chart renders the CRD when it is absent or this release's,
// and leaves it out when it is someone else's.
func TestCRDLeftAloneWhenOwnedElsewhere(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx := context.Background()
	cluster, err := localcluster.Start(ctx, localcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Stop() })
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cluster.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	rendersCRD := func() bool {
		t.Helper()
		objs, err := render.ChartOnCluster(chartDir(), nil, release, namespace, cluster.Config)
		if err != nil {
			t.Fatal(err)
		}
		if render.Find(objs, "Deployment", fullname) == nil {
			t.Fatal("the chart rendered against the cluster has no Deployment")
		}
		return render.Find(objs, "CustomResourceDefinition", crdName) != nil
	}

	if !rendersCRD() {
		t.Error("no CRD in the cluster: the chart does not render it")
	}

	b, err := os.ReadFile(filepath.Join(chartDir(), "files", "crds", "reloader.dev_reloaderconfigs.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(b, crd); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, crd); err != nil { // as Helm applies crds/, or kubectl: no owner
		t.Fatal(err)
	}
	if rendersCRD() {
		t.Error("a CRD without Helm's ownership is in the cluster: the chart renders it, and the upgrade would fail on it")
	}

	own := func(rel, ns string) {
		t.Helper()
		if err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			t.Fatal(err)
		}
		crd.Annotations = map[string]string{"meta.helm.sh/release-name": rel, "meta.helm.sh/release-namespace": ns}
		crd.Labels = map[string]string{"app.kubernetes.io/managed-by": "Helm"}
		if err := c.Update(ctx, crd); err != nil {
			t.Fatal(err)
		}
	}
	own("another", namespace)
	if rendersCRD() {
		t.Error("the CRD is another release's: the chart renders it")
	}
	own(release, namespace)
	if !rendersCRD() {
		t.Error("the CRD is this release's: the chart does not render it, so Helm would stop managing it")
	}
}
