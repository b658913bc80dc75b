package chart_test

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/reloader-operator/reloader/deployments/render"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/testutil"
)

const (
	release   = "reloader"
	namespace = "reloader-system"
	podName   = "reloader-7d4f9-abcde"
	// fullname is the name of the release's objects: <release>-<chart name>, as upstream's chart.
	fullname = release + "-reloader"

	monitoringAPI = "monitoring.coreos.com/v1"
	vpaAPI        = "autoscaling.k8s.io/v1"
)

// servedAPIs are the optional APIs the tests' cluster serves unless a test says otherwise:
// every one the chart can use.
var servedAPIs = []string{monitoringAPI, vpaAPI}

// renderValues renders the chart as the tests' release, for a cluster serving servedAPIs.
func renderValues(v map[string]any) ([]*unstructured.Unstructured, error) {
	return render.Chart(chartDir(), v, release, namespace, servedAPIs...)
}

// chartDir is deployments/chart/reloader, wherever the tests run from.
func chartDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "reloader")
}

// values parses a YAML values document.
func values(t *testing.T, doc string) map[string]any {
	t.Helper()
	v := map[string]any{}
	if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("values %q: %v", doc, err)
	}
	return v
}

func renderChart(t *testing.T, doc string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := renderValues(values(t, doc))
	if err != nil {
		t.Fatalf("render with values %q: %v", doc, err)
	}
	return objs
}

// container returns the chart's Deployment and its reloader container.
func container(t *testing.T, objs []*unstructured.Unstructured) (*appsv1.Deployment, corev1.Container) {
	t.Helper()
	deps := render.OfKind(objs, "Deployment")
	if len(deps) != 1 {
		t.Fatalf("rendered %d Deployments, want 1", len(deps))
	}
	d := &appsv1.Deployment{}
	testutil.Must(t, k8sruntime.DefaultUnstructuredConverter.FromUnstructured(deps[0].Object, d))
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "reloader" {
			return d, c
		}
	}
	t.Fatal("no container named reloader")
	return nil, corev1.Container{}
}

// env resolves the container's env as the kubelet would for the fields the chart uses;
// Secret references are left out (envWithSecrets resolves them).
func env(c corev1.Container) map[string]string { return envWithSecrets(c, nil) }

// envWithSecrets is env with the references to the rendered Secrets in objs resolved.
func envWithSecrets(c corev1.Container, objs []*unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			out[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil && objs != nil:
			ref := e.ValueFrom.SecretKeyRef
			v, ok := secretValue(objs, ref.Name, ref.Key)
			if !ok {
				// An existing Secret's key: the tests read only URLs from those.
				v = "https://existing-secret.invalid/" + ref.Name + "/" + ref.Key
			}
			out[e.Name] = v
		case e.ValueFrom.FieldRef != nil:
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.namespace":
				out[e.Name] = namespace
			case "metadata.name":
				out[e.Name] = podName
			}
		case e.ValueFrom.ResourceFieldRef != nil:
			out[e.Name] = "1"
		}
	}
	return out
}

// secretValue reads key from the rendered Secret name (stringData, as the chart writes it).
func secretValue(objs []*unstructured.Unstructured, name, key string) (string, bool) {
	for _, o := range render.OfKind(objs, "Secret") {
		if o.GetName() == name {
			v, ok, _ := unstructured.NestedString(o.Object, "stringData", key)
			return v, ok
		}
	}
	return "", false
}

// parseOptions reads the container's args and env the way cmd/reloader does, with the
// chart's own Secrets resolved.
func parseOptions(t *testing.T, objs []*unstructured.Unstructured) options.Config {
	t.Helper()
	_, c := container(t, objs)
	o := options.Default()
	fs := pflag.NewFlagSet("reloader", pflag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse(c.Args); err != nil {
		t.Fatalf("the chart's args %q don't parse: %v", c.Args, err)
	}
	e := envWithSecrets(c, objs)
	conf, err := options.Load(o, func(k string) string { return e[k] })
	if err != nil {
		t.Fatalf("the chart's args %q and env are rejected: %v", c.Args, err)
	}
	return conf
}

func hasArg(c corev1.Container, arg string) bool {
	for _, a := range c.Args {
		if a == arg {
			return true
		}
	}
	return false
}

func argWithPrefix(c corev1.Container, prefix string) (string, bool) {
	for _, a := range c.Args {
		if strings.HasPrefix(a, prefix) {
			return strings.TrimPrefix(a, prefix), true
		}
	}
	return "", false
}
