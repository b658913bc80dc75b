package v1alpha1_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testutil"
)

const crdDir = "../../deployments/chart/reloader/files/crds"

// The API server itself refuses bad specs, with the schema's message, before reloader
// ever sees them.
func TestSchemaRefusesBadSpecs(t *testing.T) {
	ctx := context.Background()
	cluster, err := testenv.Start(ctx, testenv.Options{CRDDirectoryPaths: []string{crdDir}})
	testutil.Must(t, err)
	t.Cleanup(func() { _ = cluster.Stop() })
	scheme := runtime.NewScheme()
	testutil.Must(t, v1alpha1.AddToScheme(scheme))
	c, err := client.New(cluster.Config, client.Options{Scheme: scheme})
	testutil.Must(t, err)
	web := v1alpha1.Target{Kind: "Deployment", Name: "web"}
	cfg := v1alpha1.Source{Kind: "ConfigMap", Name: "cfg"}
	sel := &v1alpha1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	cases := []struct {
		name string
		spec v1alpha1.ReloaderConfigSpec
		// refused is a part of the API server's message; empty means accepted.
		refused string
	}{
		{"minimal", v1alpha1.ReloaderConfigSpec{Targets: []v1alpha1.Target{web}, Sources: []v1alpha1.Source{cfg}}, ""},
		{"selectors, keys and overrides", v1alpha1.ReloaderConfigSpec{
			Targets:        []v1alpha1.Target{{Kind: "StatefulSet", Selector: sel}},
			Sources:        []v1alpha1.Source{{Kind: "Secret", Selector: sel, Keys: []string{"password", "tls.crt"}}, {Kind: "ConfigMap", Auto: true, AutoKeys: true}},
			Strategy:       "annotations",
			PausePeriod:    &metav1.Duration{Duration: 300e9},
			CoalesceWindow: &metav1.Duration{Duration: 2e9},
		}, ""},
		{"no targets", v1alpha1.ReloaderConfigSpec{Sources: []v1alpha1.Source{cfg}}, "spec.targets"},
		{"generic targets only", v1alpha1.ReloaderConfigSpec{Sources: []v1alpha1.Source{cfg}, GenericTargets: []v1alpha1.GenericTarget{
			{APIVersion: "grafana.integreatly.org/v1beta1", Kind: "Grafana", Name: "grafana", TemplatePath: "spec.deployment.spec.template"}}}, ""},
		{"generic target path too deep", v1alpha1.ReloaderConfigSpec{Sources: []v1alpha1.Source{cfg}, GenericTargets: []v1alpha1.GenericTarget{
			{APIVersion: "v1", Kind: "Grafana", Name: "grafana", TemplatePath: strings.TrimSuffix(strings.Repeat("a.", 11), ".")}}}, "spec.genericTargets[0].templatePath"},
		{"generic target by owner", v1alpha1.ReloaderConfigSpec{Sources: []v1alpha1.Source{cfg}, GenericTargets: []v1alpha1.GenericTarget{
			{APIVersion: "v1", Kind: "Grafana", OwnerOf: &v1alpha1.WorkloadRef{Kind: "Deployment", Name: "web"}, TemplatePath: "spec.template"}}}, ""},
		{"generic target name and owner", v1alpha1.ReloaderConfigSpec{Sources: []v1alpha1.Source{cfg}, GenericTargets: []v1alpha1.GenericTarget{
			{APIVersion: "v1", Kind: "Grafana", Name: "g", OwnerOf: &v1alpha1.WorkloadRef{Kind: "Deployment", Name: "web"}, TemplatePath: "spec.template"}}}, "exactly one of name and ownerOf"},
		{"generic target bad apiVersion", v1alpha1.ReloaderConfigSpec{Sources: []v1alpha1.Source{cfg}, GenericTargets: []v1alpha1.GenericTarget{
			{APIVersion: "Grafana/x", Kind: "Grafana", Name: "grafana", TemplatePath: "spec.template"}}}, "spec.genericTargets[0].apiVersion"},
		{"target with name and selector", v1alpha1.ReloaderConfigSpec{
			Targets: []v1alpha1.Target{{Kind: "Deployment", Name: "web", Selector: sel}}, Sources: []v1alpha1.Source{cfg}},
			"a target has exactly one of name, selector and all: true"},
		{"target with neither", v1alpha1.ReloaderConfigSpec{
			Targets: []v1alpha1.Target{{Kind: "Deployment"}}, Sources: []v1alpha1.Source{cfg}},
			"a target has exactly one of name, selector and all: true"},
		{"all, said explicitly", v1alpha1.ReloaderConfigSpec{
			Targets: []v1alpha1.Target{{Kind: "Deployment", All: true}}, Sources: []v1alpha1.Source{{Kind: "Secret", All: true}}}, ""},
		{"target with selector and all", v1alpha1.ReloaderConfigSpec{
			Targets: []v1alpha1.Target{{Kind: "Deployment", Selector: sel, All: true}}, Sources: []v1alpha1.Source{cfg}},
			"a target has exactly one of name, selector and all: true"},
		{"empty target selector", v1alpha1.ReloaderConfigSpec{
			Targets: []v1alpha1.Target{{Kind: "Deployment", Selector: &v1alpha1.LabelSelector{}}}, Sources: []v1alpha1.Source{cfg}},
			"an empty selector would choose everything"},
		{"empty source selector", v1alpha1.ReloaderConfigSpec{
			Targets: []v1alpha1.Target{web}, Sources: []v1alpha1.Source{{Kind: "ConfigMap", Selector: &v1alpha1.LabelSelector{MatchLabels: map[string]string{}}}}},
			"an empty selector would choose everything"},
		{"too many matchLabels", v1alpha1.ReloaderConfigSpec{
			Targets: []v1alpha1.Target{{Kind: "Deployment", Selector: &v1alpha1.LabelSelector{MatchLabels: manyLabels(v1alpha1.MaxMatchLabels + 1)}}}, Sources: []v1alpha1.Source{cfg}},
			"spec.targets[0].selector.matchLabels: Too many"},
		{"long label value", v1alpha1.ReloaderConfigSpec{
			Targets: []v1alpha1.Target{web}, Sources: []v1alpha1.Source{{Kind: "ConfigMap", Selector: &v1alpha1.LabelSelector{MatchLabels: map[string]string{"app": strings.Repeat("v", 64)}}}}},
			"a label key has at most 317 characters (prefix/name) and a value at most 63"},
		{"too many matchExpressions", v1alpha1.ReloaderConfigSpec{
			Targets: []v1alpha1.Target{{Kind: "Deployment", Selector: &v1alpha1.LabelSelector{MatchExpressions: manyExpressions(v1alpha1.MaxMatchExpressions+1, 1)}}}, Sources: []v1alpha1.Source{cfg}},
			"spec.targets[0].selector.matchExpressions: Too many"},
		{"too many values", v1alpha1.ReloaderConfigSpec{
			Targets: []v1alpha1.Target{web}, Sources: []v1alpha1.Source{{Kind: "ConfigMap", Selector: &v1alpha1.LabelSelector{MatchExpressions: manyExpressions(1, v1alpha1.MaxSelectorValues+1)}}}},
			"spec.sources[0].selector.matchExpressions[0].values: Too many"},
		{"bad operator", v1alpha1.ReloaderConfigSpec{
			Targets: []v1alpha1.Target{{Kind: "Deployment", Selector: &v1alpha1.LabelSelector{MatchExpressions: []v1alpha1.LabelSelectorRequirement{{Key: "team", Operator: "Sometimes"}}}}}, Sources: []v1alpha1.Source{cfg}},
			"spec.targets[0].selector.matchExpressions[0].operator"},
		{"bounded selector at its limits", v1alpha1.ReloaderConfigSpec{
			Targets: []v1alpha1.Target{{Kind: "Deployment", Selector: &v1alpha1.LabelSelector{MatchLabels: manyLabels(v1alpha1.MaxMatchLabels),
				MatchExpressions: manyExpressions(v1alpha1.MaxMatchExpressions, v1alpha1.MaxSelectorValues)}}}, Sources: []v1alpha1.Source{cfg}}, ""},
		{"unknown kind", v1alpha1.ReloaderConfigSpec{
			Targets: []v1alpha1.Target{{Kind: "Pod", Name: "web"}}, Sources: []v1alpha1.Source{cfg}},
			"spec.targets[0].kind"},
		{"source with name and auto", v1alpha1.ReloaderConfigSpec{
			Targets: []v1alpha1.Target{web}, Sources: []v1alpha1.Source{{Kind: "ConfigMap", Name: "cfg", Auto: true}}},
			"a source has exactly one of name, selector, auto: true and all: true"},
		{"keys and autoKeys", v1alpha1.ReloaderConfigSpec{
			Targets: []v1alpha1.Target{web}, Sources: []v1alpha1.Source{{Kind: "ConfigMap", Name: "cfg", Keys: []string{"a"}, AutoKeys: true}}},
			"keys and autoKeys: true exclude each other"},
		{"bad key", v1alpha1.ReloaderConfigSpec{
			Targets: []v1alpha1.Target{web}, Sources: []v1alpha1.Source{{Kind: "ConfigMap", Name: "cfg", Keys: []string{"a/b"}}}},
			"spec.sources[0].keys[0]"},
		{"bad name", v1alpha1.ReloaderConfigSpec{
			Targets: []v1alpha1.Target{{Kind: "Deployment", Name: "Web_1"}}, Sources: []v1alpha1.Source{cfg}},
			"spec.targets[0].name"},
		{"long pause", v1alpha1.ReloaderConfigSpec{
			Targets: []v1alpha1.Target{web}, Sources: []v1alpha1.Source{cfg}, PausePeriod: &metav1.Duration{Duration: 200 * 3600e9}},
			"pausePeriod must be a duration between 0s and 168h"},
		{"long min reload interval", v1alpha1.ReloaderConfigSpec{
			Targets: []v1alpha1.Target{web}, Sources: []v1alpha1.Source{cfg}, MinReloadInterval: &metav1.Duration{Duration: 200 * 3600e9}},
			"minReloadInterval must be a duration between 0s and 168h"},
		{"long reload window", v1alpha1.ReloaderConfigSpec{
			Targets: []v1alpha1.Target{web}, Sources: []v1alpha1.Source{cfg}, ReloadWindow: strings.Repeat("daily 02:00-03:00 UTC;", 30)},
			"spec.reloadWindow: Too long"},
		{"bad strategy", v1alpha1.ReloaderConfigSpec{
			Targets: []v1alpha1.Target{web}, Sources: []v1alpha1.Source{cfg}, Strategy: "restart"},
			"spec.strategy"},
		{"too many targets", v1alpha1.ReloaderConfigSpec{
			Targets: manyTargets(v1alpha1.MaxTargets + 1), Sources: []v1alpha1.Source{cfg}},
			"spec.targets: Too many"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := &v1alpha1.ReloaderConfig{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d", i), Namespace: "default"}, Spec: tc.spec}
			err := c.Create(ctx, obj)
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("refused a valid spec: %v", err)
			case tc.refused != "" && err == nil:
				t.Fatalf("accepted a spec that should be refused with %q", tc.refused)
			case tc.refused != "" && !strings.Contains(err.Error(), tc.refused):
				t.Fatalf("refused, but the message does not say %q: %v", tc.refused, err)
			}
		})
	}
}

func manyLabels(n int) map[string]string {
	out := map[string]string{}
	for i := range n {
		out[fmt.Sprintf("example.com/label-%d", i)] = "v"
	}
	return out
}

func manyExpressions(n, values int) []v1alpha1.LabelSelectorRequirement {
	out := make([]v1alpha1.LabelSelectorRequirement, n)
	for i := range out {
		out[i] = v1alpha1.LabelSelectorRequirement{Key: fmt.Sprintf("k%d", i), Operator: "In"}
		for j := range values {
			out[i].Values = append(out[i].Values, fmt.Sprintf("v%d", j))
		}
	}
	return out
}

func manyTargets(n int) []v1alpha1.Target {
	out := make([]v1alpha1.Target, n)
	for i := range out {
		out[i] = v1alpha1.Target{Kind: "Deployment", Name: fmt.Sprintf("w%d", i)}
	}
	return out
}

// The committed CRD is what controller-gen makes of the types now.
func TestCRDIsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("runs controller-gen")
	}
	out := t.TempDir()
	cmd := exec.Command("go", "run", "sigs.k8s.io/controller-tools/cmd/controller-gen@v0.20.0",
		"crd", "paths=./...", "output:crd:dir="+out)
	cmd.Dir = "."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen: %v\n%s", err, b)
	}
	files, err := filepath.Glob(filepath.Join(out, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("controller-gen wrote no CRD (%v)", err)
	}
	for _, f := range files {
		want, _ := os.ReadFile(f)
		got, err := os.ReadFile(filepath.Join(crdDir, filepath.Base(f)))
		if err != nil || string(got) != string(want) {
			t.Errorf("%s is stale or missing: run `make generate` and commit it", filepath.Join(crdDir, filepath.Base(f)))
		}
	}
}
