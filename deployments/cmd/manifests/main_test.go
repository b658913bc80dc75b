package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/reloader-operator/reloader/deployments/render"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// The committed manifests are what the chart renders now.
func TestCommittedManifestsAreCurrent(t *testing.T) {
	dir := filepath.Join("..", "..")
	files, err := generate(filepath.Join(dir, "chart", "reloader"))
	testutil.Must(t, err)
	for p, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("deployments/%s is stale or missing: run `make manifests`", p)
		}
	}
	present, _ := filepath.Glob(filepath.Join(dir, "kustomize", "base", "*.yaml"))
	for _, f := range present {
		rel, _ := filepath.Rel(dir, f)
		if _, ok := files[rel]; !ok {
			t.Errorf("deployments/%s is no longer generated: run `make manifests`", rel)
		}
	}
}

// Rendering twice gives the same bytes: no map order or time leaks into the files.
func TestDeterministic(t *testing.T) {
	a, err := generate(filepath.Join("..", "..", "chart", "reloader"))
	testutil.Must(t, err)
	for range 3 {
		b, err := generate(filepath.Join("..", "..", "chart", "reloader"))
		testutil.Must(t, err)
		for p := range a {
			if !bytes.Equal(a[p], b[p]) {
				t.Fatalf("%s differs between two renders", p)
			}
		}
	}
}

// reloader.yaml holds the same objects as the Kustomize base, Namespace first, and nothing
// that says Helm manages them.
func TestManifestContent(t *testing.T) {
	files, err := generate(filepath.Join("..", "..", "chart", "reloader"))
	testutil.Must(t, err)
	objs, err := render.Decode(string(files["reloader.yaml"]))
	testutil.Must(t, err)
	if objs[0].GetKind() != "Namespace" || objs[0].GetName() != namespace {
		t.Errorf("first object is %s %s, want Namespace %s", objs[0].GetKind(), objs[0].GetName(), namespace)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
		if _, ok := o.GetLabels()["helm.sh/chart"]; ok {
			t.Errorf("%s %s carries helm.sh/chart", o.GetKind(), o.GetName())
		}
		clusterScoped := []string{"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}
		if !slices.Contains(clusterScoped, o.GetKind()) && o.GetNamespace() != namespace {
			t.Errorf("%s %s in namespace %q, want %s", o.GetKind(), o.GetName(), o.GetNamespace(), namespace)
		}
	}
	for _, k := range []string{"CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment"} {
		if !slices.Contains(kinds, k) {
			t.Errorf("no %s in reloader.yaml: %v", k, kinds)
		}
	}
	if n := len(files) - 2; n != len(objs) { // minus reloader.yaml and kustomization.yaml
		t.Errorf("the Kustomize base has %d resources, reloader.yaml %d", n, len(objs))
	}
}

// The Kustomize base builds (as `kubectl apply -k` would) into the objects of reloader.yaml.
func TestKustomizeBaseBuilds(t *testing.T) {
	dir := filepath.Join("..", "..")
	resmap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(dir, "kustomize", "base"))
	if err != nil {
		t.Fatalf("kustomize build: %v", err)
	}
	built, err := resmap.AsYaml()
	testutil.Must(t, err)
	fromBase, err := render.Decode(string(built))
	testutil.Must(t, err)
	raw, err := os.ReadFile(filepath.Join(dir, "reloader.yaml"))
	testutil.Must(t, err)
	plain, err := render.Decode(string(raw))
	testutil.Must(t, err)
	index := func(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
		m := map[string]*unstructured.Unstructured{}
		for _, o := range objs {
			m[o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName()] = o
		}
		return m
	}
	a, b := index(fromBase), index(plain)
	if len(a) != len(b) {
		t.Errorf("kustomize build gives %d objects, reloader.yaml %d", len(a), len(b))
	}
	for k, o := range b {
		if !equality.Semantic.DeepEqual(a[k], o) {
			t.Errorf("%s differs between the Kustomize base and reloader.yaml", k)
		}
	}
}
