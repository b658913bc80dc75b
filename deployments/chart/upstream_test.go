package chart_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/reloader-operator/reloader/deployments/render"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// upstreamValuesFiles are upstream's whole default values files (`helm show values` of
// stakater/Reloader's chart, comments removed): what a user who copied them has.
var upstreamValuesFiles = []string{"upstream-values-v1.4.21.yaml", "upstream-values-master.yaml"}

func readValuesFile(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	testutil.Must(t, err)
	v := map[string]any{}
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

// TestUpstreamDefaultValuesFiles: upstream's default values files pass the schema and render,
// on clusters with and without the optional APIs, into what they mean upstream.
func TestUpstreamDefaultValuesFiles(t *testing.T) {
	for _, file := range upstreamValuesFiles {
		for _, apis := range [][]string{nil, servedAPIs} {
			v := readValuesFile(t, file)
			objs, err := render.Chart(chartDir(), v, release, namespace, apis...)
			if err != nil {
				t.Errorf("%s (APIs %v): %v", file, apis, err)
				continue
			}
			d, c := container(t, objs)
			parseOptions(t, objs)
			img := v["image"].(map[string]any)
			if want := img["repository"].(string) + ":" + img["tag"].(string); c.Image != want {
				t.Errorf("%s: image %s, want %s (the file's image.repository and tag)", file, c.Image, want)
			}
			if d.Name != fullname {
				t.Errorf("%s: Deployment %s, want %s", file, d.Name, fullname)
			}
			if got := d.Spec.Template.Labels["provider"]; got != "stakater" {
				t.Errorf("%s: pod label provider = %q, want the file's deployment.labels on the pods", file, got)
			}
			if !hasArg(c, "--log-level=info") {
				t.Errorf("%s: args %q, want --log-level=info (the file's logLevel)", file, c.Args)
			}
			if d.Spec.Template.Spec.HostUsers != nil {
				t.Errorf("%s: hostUsers %v, want unset (the file's null)", file, *d.Spec.Template.Spec.HostUsers)
			}
			if render.Find(objs, "ClusterRole", fullname+"-role") == nil {
				t.Errorf("%s: no ClusterRole %s-role (watchGlobally true)", file, fullname)
			}
		}
	}
}

// Every key of upstream's default values files is one the schema names: the render above
// would refuse an unknown one, and this says which keys the files hold, so that a file
// shrunk by mistake can't make the test pass.
func TestUpstreamValuesFilesHoldTheKnownKeys(t *testing.T) {
	for _, file := range upstreamValuesFiles {
		keys := flatKeys("", readValuesFile(t, file))
		for _, k := range []string{"reloader.deployment.hostUsers", "reloader.namespaces", "reloader.serviceMonitor.enabled", "image.name", "reloader.webhookUrl"} {
			if !slices.Contains(keys, k) {
				t.Errorf("%s: no key %s", file, k)
			}
		}
	}
	if keys := flatKeys("", readValuesFile(t, "upstream-values-master.yaml")); !slices.Contains(keys, "reloader.deployment.runtimeClassName") {
		t.Error("upstream-values-master.yaml: no reloader.deployment.runtimeClassName")
	}
}

func flatKeys(prefix string, m map[string]any) []string {
	var out []string
	for k, v := range m {
		out = append(out, prefix+k)
		if sub, ok := v.(map[string]any); ok {
			out = append(out, flatKeys(prefix+k+".", sub)...)
		}
	}
	return out
}
