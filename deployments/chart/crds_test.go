package chart_test

import (
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/reloader-operator/reloader/deployments/render"
)

// Helm installs the ReloaderConfig CRD from the chart's crds/ (left out with --skip-crds),
// and the plain manifests carry the same CRD.
func TestChartShipsTheReloaderConfigCRD(t *testing.T) {
	chrt, err := loader.Load(chartDir())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(chrt.CRDObjects()); n != 1 {
		t.Fatalf("Helm sees %d CRD files in the chart, want 1", n)
	}
	crds, err := render.CRDs(chartDir())
	if err != nil {
		t.Fatal(err)
	}
	if crd := render.Find(crds, "CustomResourceDefinition", "reloaderconfigs.reloader.dev"); crd == nil {
		t.Fatalf("no reloaderconfigs.reloader.dev CRD in the chart's crds/: %v", crds)
	}
}
