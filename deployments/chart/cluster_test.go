package chart_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/reloader-operator/reloader/deployments/render"
	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// startCluster starts a control plane for the test, and a client of it.
func startCluster(t *testing.T) (*testenv.Cluster, client.Client) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	cluster, err := testenv.Start(context.Background(), testenv.Options{})
	testutil.Must(t, err)
	t.Cleanup(func() { _ = cluster.Stop() })
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{apiextensionsv1.AddToScheme, clientgoscheme.AddToScheme} {
		testutil.Must(t, add(scheme))
	}
	c, err := client.New(cluster.Config, client.Options{Scheme: scheme})
	testutil.Must(t, err)
	return cluster, c
}

// An upgrade from a release whose CRD came from crds/ (an earlier version of this chart) or
// from kubectl must not fail on it: Helm refuses to take over an object another owner has.
// Against a real API server, the chart renders the CRD when it is absent or this release's,
// and leaves it out when it is someone else's.
func TestCRDLeftAloneWhenOwnedElsewhere(t *testing.T) {
	ctx := context.Background()
	cluster, c := startCluster(t)
	rendersCRD := func() bool {
		t.Helper()
		objs, err := render.ChartOnCluster(chartDir(), nil, release, namespace, cluster.Config)
		testutil.Must(t, err)
		if render.Find(objs, "Deployment", fullname) == nil {
			t.Fatal("the chart rendered against the cluster has no Deployment")
		}
		return render.Find(objs, "CustomResourceDefinition", crdName) != nil
	}

	if !rendersCRD() {
		t.Error("no CRD in the cluster: the chart does not render it")
	}

	b, err := os.ReadFile(filepath.Join(chartDir(), "files", "crds", "reloader.dev_reloaderconfigs.yaml"))
	testutil.Must(t, err)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	testutil.Must(t, yaml.Unmarshal(b, crd))
	if err := c.Create(ctx, crd); err != nil { // as Helm applies crds/, or kubectl: no owner
		t.Fatal(err)
	}
	if rendersCRD() {
		t.Error("a CRD without Helm's ownership is in the cluster: the chart renders it, and the upgrade would fail on it")
	}

	own := func(rel, ns string) {
		t.Helper()
		// The API server's CRD controllers write its status meanwhile (names accepted,
		// established): a conflict reads it again.
		testutil.Must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
				return err
			}
			crd.Annotations = map[string]string{"meta.helm.sh/release-name": rel, "meta.helm.sh/release-namespace": ns}
			crd.Labels = map[string]string{"app.kubernetes.io/managed-by": "Helm"}
			return c.Update(ctx, crd)
		}))
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

// A Deployment's selector can't change. The live one of this release's Deployment is kept when
// the rendered pods carry it (an earlier version of this chart selected
// app.kubernetes.io/name and instance), so that the upgrade doesn't fail; otherwise, and for
// a Deployment that isn't this release's, the selector is upstream's.
func TestLiveSelectorKeptWhenThePodsCarryIt(t *testing.T) {
	ctx := context.Background()
	cluster, c := startCluster(t)
	testutil.Must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}))
	upstreams := map[string]string{"app": fullname, "release": release}
	ours := map[string]string{"app.kubernetes.io/name": "reloader", "app.kubernetes.io/instance": release}
	for _, tt := range []struct {
		name     string
		live     map[string]string
		owner    string
		selector map[string]string
	}{
		{"this chart's earlier selector", ours, release, ours},
		{"upstream's selector", upstreams, release, upstreams},
		{"a selector the pods don't carry", map[string]string{"app": "something-else"}, release, upstreams},
		{"another release's Deployment", ours, "another", upstreams},
	} {
		live := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: fullname, Namespace: namespace, Annotations: map[string]string{
				"meta.helm.sh/release-name": tt.owner, "meta.helm.sh/release-namespace": namespace}},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: tt.live},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: tt.live},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "reloader", Image: "reloader"}}},
				},
			},
		}
		testutil.Must(t, c.Create(ctx, live))
		objs, err := render.ChartOnCluster(chartDir(), nil, release, namespace, cluster.Config)
		testutil.Must(t, err)
		d, _ := container(t, objs)
		if !maps.Equal(d.Spec.Selector.MatchLabels, tt.selector) {
			t.Errorf("%s: selector %v, want %v", tt.name, d.Spec.Selector.MatchLabels, tt.selector)
		}
		if !labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("%s: selector %v doesn't select the pods %v", tt.name, d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
		}
		testutil.Must(t, c.Delete(ctx, live))
	}
}
