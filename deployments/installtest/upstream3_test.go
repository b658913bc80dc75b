package installtest

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/reloader-operator/reloader/deployments/render"
	"github.com/reloader-operator/reloader/internal/testutil"
)

const (
	// upstreamChart3Values is upstream's values file of chart 3.0.0-beta.1, verbatim (see
	// testdata/upstream-chart-3.0.0-beta.1-values.SOURCE), and upstreamChart3ValuesBlob its git
	// blob id there.
	upstreamChart3Values     = "upstream-chart-3.0.0-beta.1-values.yaml"
	upstreamChart3ValuesBlob = "8f754bebc134011b2b75083080735675c7606105"
)

// gitBlobID is the id git gives a file of content b.
func gitBlobID(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

func readTestdataValues(t *testing.T, name string) map[string]any {
	t.Helper()
	v, err := chartutil.ReadValuesFile(filepath.Join(repoRoot, "deployments", "installtest", "testdata", name))
	testutil.Must(t, err)
	return v
}

// templateChart renders a loaded chart client-side, as `helm template` (render.Manifest) does
// a chart directory; the release holds the manifest and the notes (whose lookups find nothing).
func templateChart(t *testing.T, ch *chart.Chart, values map[string]any, name, ns string) *release.Release {
	t.Helper()
	inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	inst.ClientOnly, inst.DryRun, inst.DisableHooks = true, true, true
	inst.ReleaseName, inst.Namespace = name, ns
	inst.KubeVersion = &chartutil.KubeVersion{Version: render.KubeVersion, Major: "1", Minor: "37"}
	rel, err := inst.Run(ch, values)
	if err != nil {
		t.Fatalf("render chart %s %s: %v", ch.Metadata.Name, ch.Metadata.Version, err)
	}
	return rel
}

// renderNotes is the NOTES.txt `helm install` of our chart prints with values.
func renderNotes(t *testing.T, values map[string]any) string {
	t.Helper()
	return templateChart(t, loadChart(t, chartDir), values, "reloader", "reloader").Info.Notes
}

// TestUpstreamChart3ValuesFile: upstream chart 3.0.0-beta.1's own values file (its new
// enterprise.* and global.host, ingressScheme, gatewayBasePath keys, and image.tag "") passes
// our schema and renders, as `helm template` does, on clusters with and without the optional
// APIs: upstream's Deployment name and selector, upstream's pod labels, and reloader's image
// (upstream's repository with no tag would be stakater's image at our version, which does
// not exist), which the NOTES say.
func TestUpstreamChart3ValuesFile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", upstreamChart3Values))
	testutil.Must(t, err)
	if id := gitBlobID(b); id != upstreamChart3ValuesBlob {
		t.Fatalf("testdata/%s is blob %s, not upstream's %s: keep upstream's file verbatim", upstreamChart3Values, id, upstreamChart3ValuesBlob)
	}
	values := readTestdataValues(t, upstreamChart3Values)
	keys := flatValueKeys("", values)
	for _, k := range []string{"enterprise.enabled", "enterprise.console.enabled", "enterprise.gateway.dragonfly.enabled",
		"enterprise.dragonfly.fullnameOverride", "global.host", "global.ingressScheme", "global.gatewayBasePath", "image.tag"} {
		if !slices.Contains(keys, k) {
			t.Errorf("%s: no key %s (not upstream's chart 3 values file?)", upstreamChart3Values, k)
		}
	}
	ourImage := "ghcr.io/reloader-operator/reloader:" + loadChart(t, chartDir).Metadata.AppVersion
	for _, apis := range [][]string{nil, {"monitoring.coreos.com/v1", "autoscaling.k8s.io/v1"}} {
		objs, err := render.Chart(chartDir, values, "reloader", "reloader", apis...)
		if err != nil {
			t.Fatalf("helm template with upstream chart 3.0.0-beta.1's values (APIs %v): %v", apis, err)
		}
		deploys := render.OfKind(objs, "Deployment")
		if len(deploys) != 1 {
			t.Fatalf("rendered %d Deployments, want 1", len(deploys))
		}
		var d appsv1.Deployment
		testutil.Must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(deploys[0].Object, &d))
		if d.Name != "reloader-reloader" {
			t.Errorf("Deployment %s, want upstream's name reloader-reloader", d.Name)
		}
		if want := map[string]string{"app": "reloader-reloader", "release": "reloader"}; !maps.Equal(d.Spec.Selector.MatchLabels, want) {
			t.Errorf("selector %v, want upstream's %v", d.Spec.Selector.MatchLabels, want)
		}
		if got := d.Spec.Template.Labels["version"]; got != "v1.4.19" {
			t.Errorf("pod label version = %q, want the file's deployment.labels (v1.4.19)", got)
		}
		if c := d.Spec.Template.Spec.Containers[0]; c.Image != ourImage {
			t.Errorf("image %s, want %s (the file names upstream's repository with no tag)", c.Image, ourImage)
		}
	}
	notes := renderNotes(t, values)
	if !strings.Contains(notes, "this chart runs its own image instead: "+ourImage) {
		t.Errorf("NOTES do not say the image was replaced by %s:\n%s", ourImage, notes)
	}
	if strings.Contains(notes, "Ignored:") {
		t.Errorf("NOTES name ignored enterprise values, but the file leaves Reloader Enterprise off:\n%s", notes)
	}
}

// TestUpstreamChart3EnterpriseValuesIgnored: upstream chart 3's Reloader Enterprise values,
// switched on, change nothing our chart renders, and the NOTES name each that was set; under
// enterprise any key of upstream's subchart is accepted, while a misspelt top-level key is
// still refused.
func TestUpstreamChart3EnterpriseValuesIgnored(t *testing.T) {
	base := readTestdataValues(t, upstreamChart3Values)
	plain, err := render.Manifest(chartDir, base, "reloader", "reloader")
	testutil.Must(t, err)

	on := readTestdataValues(t, upstreamChart3Values)
	on["enterprise"] = map[string]any{
		"enabled": true,
		"console": map[string]any{"enabled": true, "ingress": map[string]any{"annotations": map[string]any{"route.openshift.io/termination": "edge"}}},
		"gateway": map[string]any{"enabled": true, "dragonfly": map[string]any{"enabled": true}, "deployment": map[string]any{"image": map[string]any{"tag": "v0.0.23"}}},
	}
	g := on["global"].(map[string]any)
	g["host"], g["ingressScheme"], g["gatewayBasePath"] = "reloader.example.com", "http", "/gw"
	ignored, err := render.Manifest(chartDir, on, "reloader", "reloader")
	if err != nil {
		t.Fatalf("helm template with Reloader Enterprise on: %v", err)
	}
	if ignored != plain {
		t.Errorf("Reloader Enterprise values changed what the chart renders:\n--- off\n%s\n--- on\n%s", plain, ignored)
	}
	notes := renderNotes(t, on)
	want := "Ignored: enterprise.enabled, global.host, global.ingressScheme, global.gatewayBasePath."
	if !strings.Contains(notes, want) {
		t.Errorf("NOTES lack %q:\n%s", want, notes)
	}

	typo := readTestdataValues(t, upstreamChart3Values)
	typo["enterprize"] = map[string]any{"enabled": true}
	if _, err := render.Manifest(chartDir, typo, "reloader", "reloader"); err == nil || !strings.Contains(err.Error(), "enterprize") {
		t.Errorf("a misspelt key enterprize: got %v, want a schema error naming it", err)
	}
}

func flatValueKeys(prefix string, m map[string]any) []string {
	var out []string
	for k, v := range m {
		out = append(out, prefix+k)
		if sub, ok := v.(map[string]any); ok {
			out = append(out, flatValueKeys(prefix+k+".", sub)...)
		}
	}
	return out
}
