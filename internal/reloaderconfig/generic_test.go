package reloaderconfig

import (
	"strings"
	"testing"

	"github.com/reloader-operator/reloader/api/v1alpha1"
)

func TestCompileGenericTargets(t *testing.T) {
	good := v1alpha1.GenericTarget{APIVersion: "grafana.integreatly.org/v1beta1", Kind: "Grafana", Name: "grafana",
		TemplatePath: "spec.deployment.spec.template"}
	tests := []struct {
		name    string
		change  func(*v1alpha1.GenericTarget)
		wantErr string
	}{
		{"good", func(*v1alpha1.GenericTarget) {}, ""},
		{"core group", func(g *v1alpha1.GenericTarget) { g.APIVersion = "v1" }, ""},
		{"ten segments", func(g *v1alpha1.GenericTarget) { g.TemplatePath = strings.TrimSuffix(strings.Repeat("a.", 10), ".") }, ""},
		{"eleven segments", func(g *v1alpha1.GenericTarget) { g.TemplatePath = strings.TrimSuffix(strings.Repeat("a.", 11), ".") }, "at most 10"},
		{"empty segment", func(g *v1alpha1.GenericTarget) { g.TemplatePath = "spec..template" }, "not a field name"},
		{"dash", func(g *v1alpha1.GenericTarget) { g.TemplatePath = "spec.pod-template" }, "not a field name"},
		{"index", func(g *v1alpha1.GenericTarget) { g.TemplatePath = "spec.templates[0]" }, "not a field name"},
		{"empty", func(g *v1alpha1.GenericTarget) { g.TemplatePath = "" }, "1 to 256"},
		{"too long", func(g *v1alpha1.GenericTarget) { g.TemplatePath = strings.Repeat("a", 300) }, "1 to 256"},
		{"long segment", func(g *v1alpha1.GenericTarget) { g.TemplatePath = strings.Repeat("a", 64) }, "not a field name"},
		{"longest segment", func(g *v1alpha1.GenericTarget) { g.TemplatePath = "_" + strings.Repeat("a", 62) }, ""},
		{"longest kind", func(g *v1alpha1.GenericTarget) { g.Kind = "G" + strings.Repeat("a", 62) }, ""},
		{"long kind", func(g *v1alpha1.GenericTarget) { g.Kind = "G" + strings.Repeat("a", 63) }, "kind"},
		{"longest name", func(g *v1alpha1.GenericTarget) { g.Name = strings.Repeat("a.", 126) + "a" }, ""},
		{"long name", func(g *v1alpha1.GenericTarget) { g.Name = strings.Repeat("a.", 126) + "aa" }, "name"},
		{"name ending in a dot", func(g *v1alpha1.GenericTarget) { g.Name = "grafana." }, "name"},
		{"no version", func(g *v1alpha1.GenericTarget) { g.APIVersion = "grafana.integreatly.org/" }, "apiVersion"},
		{"lower kind", func(g *v1alpha1.GenericTarget) { g.Kind = "grafana" }, "kind"},
		{"bad name", func(g *v1alpha1.GenericTarget) { g.Name = "Grafana" }, "name"},
		{"owner of", func(g *v1alpha1.GenericTarget) {
			g.Name, g.OwnerOf = "", &v1alpha1.WorkloadRef{Kind: "Deployment", Name: "grafana-deployment"}
		}, ""},
		{"name and owner of", func(g *v1alpha1.GenericTarget) {
			g.OwnerOf = &v1alpha1.WorkloadRef{Kind: "Deployment", Name: "grafana-deployment"}
		}, "exactly one of name"},
		{"neither", func(g *v1alpha1.GenericTarget) { g.Name = "" }, "exactly one of name"},
		{"owner of a Job", func(g *v1alpha1.GenericTarget) {
			g.Name, g.OwnerOf = "", &v1alpha1.WorkloadRef{Kind: "Job", Name: "x"}
		}, "ownerOf.kind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := good
			tt.change(&g)
			c := Compile(config("c", v1alpha1.ReloaderConfigSpec{GenericTargets: []v1alpha1.GenericTarget{g}}))
			if tt.wantErr == "" {
				if len(c.Errs) > 0 || len(c.Generic) != 1 {
					t.Fatalf("errs %v, generic %v", c.Errs, c.Generic)
				}
				return
			}
			if len(c.Generic) != 0 || len(c.Errs) != 1 || !strings.Contains(c.Errs[0].Error(), tt.wantErr) ||
				!strings.Contains(c.Errs[0].Error(), "spec.genericTargets[0]") {
				t.Fatalf("want an error with %q, got errs %v, generic %v", tt.wantErr, c.Errs, c.Generic)
			}
		})
	}
	c := Compile(config("c", v1alpha1.ReloaderConfigSpec{GenericTargets: []v1alpha1.GenericTarget{good}}))
	if g := c.Generic[0]; g.GVK.Group != "grafana.integreatly.org" || g.GVK.Version != "v1beta1" || g.GVK.Kind != "Grafana" ||
		strings.Join(g.Path, "|") != "spec|deployment|spec|template" {
		t.Fatalf("compiled %+v", g)
	}
}
