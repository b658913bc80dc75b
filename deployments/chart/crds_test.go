package chart_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"sigs.k8s.io/yaml"

	"github.com/reloader-operator/reloader/deployments/render"
)

const crdName = "reloaderconfigs.reloader.dev"

// The ReloaderConfig CRD is a template, not in crds/ (which Helm applies on install only, so
// `helm upgrade` would leave it missing or old), it is what `make generate` wrote, and Helm
// keeps it on uninstall.
func TestChartRendersTheReloaderConfigCRD(t *testing.T) {
	chrt, err := loader.Load(chartDir())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(chrt.CRDObjects()); n != 0 {
		t.Errorf("Helm sees %d CRD files in the chart's crds/, want none: helm upgrade never applies them", n)
	}
	crd := render.Find(renderChart(t, ``), "CustomResourceDefinition", crdName)
	if crd == nil {
		t.Fatalf("the chart renders no %s CRD", crdName)
	}
	if p := crd.GetAnnotations()["helm.sh/resource-policy"]; p != "keep" {
		t.Errorf("CRD annotation helm.sh/resource-policy = %q, want keep", p)
	}
	if l := crd.GetLabels()["app.kubernetes.io/managed-by"]; l != "Helm" {
		t.Errorf("CRD label app.kubernetes.io/managed-by = %q, want Helm", l)
	}
	b, err := os.ReadFile(filepath.Join(chartDir(), "files", "crds", "reloader.dev_reloaderconfigs.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	generated := map[string]any{}
	if err := yaml.Unmarshal(b, &generated); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(crd.Object["spec"], generated["spec"]) {
		t.Error("the rendered CRD's spec differs from the generated files/crds/reloader.dev_reloaderconfigs.yaml")
	}

	// render.CRDs (the plain manifests, the install tests) is the same CRD.
	crds, err := render.CRDs(chartDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) != 1 || crds[0].GetName() != crdName {
		t.Errorf("render.CRDs = %v, want the one %s", crds, crdName)
	}
}

// crds.install false: for clusters where CRDs are managed apart from the release.
func TestCRDInstallOff(t *testing.T) {
	if crd := render.Find(renderChart(t, `crds: {install: false}`), "CustomResourceDefinition", ""); crd != nil {
		t.Errorf("crds.install false renders CRD %s", crd.GetName())
	}
}
