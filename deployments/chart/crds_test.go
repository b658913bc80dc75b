package chart_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"sigs.k8s.io/yaml"

	"github.com/reloader-operator/reloader/deployments/render"
	"github.com/reloader-operator/reloader/internal/testutil"
)

const crdName = "reloaderconfigs.reloader.dev"

// The ReloaderConfig CRD is a template, not in crds/ (which Helm applies on install only, so
// `helm upgrade` would leave it missing or old), it is what `make generate` wrote, and Helm
// keeps it on uninstall.
func TestChartRendersTheReloaderConfigCRD(t *testing.T) {
	chrt, err := loader.Load(chartDir())
	testutil.Must(t, err)
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
	testutil.Must(t, err)
	generated := map[string]any{}
	testutil.Must(t, yaml.Unmarshal(b, &generated))
	if !reflect.DeepEqual(crd.Object["spec"], generated["spec"]) {
		t.Error("the rendered CRD's spec differs from the generated files/crds/reloader.dev_reloaderconfigs.yaml")
	}

	// render.CRDs (the plain manifests, the install tests) is the same CRD.
	crds, err := render.CRDs(chartDir())
	testutil.Must(t, err)
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

// Chart.yaml's Artifact Hub annotations name the image the chart installs by default and
// its CRD, and say which Kubernetes versions it supports.
func TestChartMetadata(t *testing.T) {
	chrt, err := loader.Load(chartDir())
	testutil.Must(t, err)
	md := chrt.Metadata
	if md.KubeVersion == "" {
		t.Error("Chart.yaml has no kubeVersion")
	}
	_, c := container(t, renderChart(t, ``))
	if images := md.Annotations["artifacthub.io/images"]; !strings.Contains(images, "image: "+c.Image+"\n") {
		t.Errorf("artifacthub.io/images %q does not name the default image %s", images, c.Image)
	}
	if crds := md.Annotations["artifacthub.io/crds"]; !strings.Contains(crds, "name: "+crdName) {
		t.Errorf("artifacthub.io/crds %q does not name %s", crds, crdName)
	}
	for _, k := range []string{"artifacthub.io/license", "artifacthub.io/links", "artifacthub.io/crdsExamples", "artifacthub.io/changes", "artifacthub.io/prerelease"} {
		if md.Annotations[k] == "" {
			t.Errorf("Chart.yaml has no annotation %s", k)
		}
	}
}
