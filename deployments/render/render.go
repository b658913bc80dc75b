// Package render renders the Helm chart the way `helm template` does, through Helm's Go SDK,
// into objects that tests and the manifests generator can read.
package render

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
)

// KubeVersion is the Kubernetes version the chart is rendered for, as `helm template
// --kube-version`: the version of hack/kube-binaries.sh.
const KubeVersion = "v1.37.0"

// Chart renders the chart in dir with values (nil for the defaults) as release releaseName in
// namespace, client-side, and returns the objects in Helm's install order. values.schema.json
// is enforced: a value the schema rejects is an error naming it. The cluster is taken to serve
// Helm's built-in API versions plus apiVersions (as `helm template --api-versions`), e.g.
// "monitoring.coreos.com/v1".
func Chart(dir string, values map[string]any, releaseName, namespace string, apiVersions ...string) ([]*unstructured.Unstructured, error) {
	manifest, err := Manifest(dir, values, releaseName, namespace, apiVersions...)
	if err != nil {
		return nil, err
	}
	return Decode(manifest)
}

// Manifest is Chart's rendered YAML, as `helm template` prints it.
func Manifest(dir string, values map[string]any, releaseName, namespace string, apiVersions ...string) (string, error) {
	chrt, err := loader.Load(dir)
	if err != nil {
		return "", fmt.Errorf("load chart %s: %w", dir, err)
	}
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.ClientOnly = true
	install.DryRun = true
	install.Replace = true
	install.DisableHooks = true
	install.IncludeCRDs = false
	install.ReleaseName = releaseName
	install.Namespace = namespace
	install.APIVersions = chartutil.VersionSet(apiVersions)
	// The SDK's default (v1.20, a value the helm binary overrides at build) is older than the
	// chart's kubeVersion; the tests' control plane runs this one.
	install.KubeVersion = &chartutil.KubeVersion{Version: KubeVersion, Major: "1", Minor: "37"}
	if values == nil {
		values = map[string]any{}
	}
	rel, err := install.Run(chrt, values)
	if err != nil {
		return "", fmt.Errorf("render chart %s: %w", dir, err)
	}
	return rel.Manifest, nil
}

// CRDs returns the CustomResourceDefinitions the chart renders with its default values (its
// templates, not crds/: Helm applies crds/ on install only, never on upgrade).
func CRDs(dir string) ([]*unstructured.Unstructured, error) {
	objs, err := Chart(dir, nil, "crds", "default")
	if err != nil {
		return nil, err
	}
	return OfKind(objs, "CustomResourceDefinition"), nil
}

// Decode splits a multi-document YAML stream into objects, skipping empty documents.
func Decode(manifest string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(manifest)), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("decode rendered manifest: %w", err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// Find returns the first object of kind with name, or nil.
func Find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			return o
		}
	}
	return nil
}

// OfKind returns the objects of one kind.
func OfKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if strings.EqualFold(o.GetKind(), kind) {
			out = append(out, o)
		}
	}
	return out
}

// ChartOnCluster renders the chart as Chart does, but against the cluster cfg reaches, as
// `helm upgrade --dry-run=server` would: the templates' `lookup` reads that cluster. The
// capabilities are Chart's (Helm's built-in APIs plus apiVersions), not the cluster's.
func ChartOnCluster(dir string, values map[string]any, releaseName, namespace string, cfg *rest.Config, apiVersions ...string) ([]*unstructured.Unstructured, error) {
	chrt, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", dir, err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = chartutil.KubeVersion{Version: KubeVersion, Major: "1", Minor: "37"}
	caps.APIVersions = append(caps.APIVersions, apiVersions...)
	if values == nil {
		values = map[string]any{}
	}
	vals, err := chartutil.ToRenderValues(chrt, values, chartutil.ReleaseOptions{Name: releaseName, Namespace: namespace, IsUpgrade: true, Revision: 2}, caps)
	if err != nil {
		return nil, fmt.Errorf("values for chart %s: %w", dir, err)
	}
	files, err := engine.New(cfg).Render(chrt, vals)
	if err != nil {
		return nil, fmt.Errorf("render chart %s: %w", dir, err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		if strings.HasSuffix(name, ".yaml") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var manifest strings.Builder
	for _, name := range names {
		manifest.WriteString("---\n" + files[name] + "\n")
	}
	return Decode(manifest.String())
}
