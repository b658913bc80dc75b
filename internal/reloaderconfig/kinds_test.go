package reloaderconfig

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestParseKindAllowlist(t *testing.T) {
	a, err := ParseKindAllowlist([]string{"grafana.integreatly.org/Grafana", " apps/Deployment", "ConfigMap", ""})
	if err != nil {
		t.Fatal(err)
	}
	for gk, want := range map[schema.GroupKind]bool{
		{Group: "grafana.integreatly.org", Kind: "Grafana"}: true,
		{Group: "apps", Kind: "Deployment"}:                 true,
		{Kind: "ConfigMap"}:                                 true,
		{Group: "apps", Kind: "StatefulSet"}:                false,
		{Group: "other.io", Kind: "Grafana"}:                false,
	} {
		if got := a.Allows(gk); got != want {
			t.Errorf("Allows(%v) = %v, want %v", gk, got, want)
		}
	}
	if none := (KindAllowlist{}); none.Allows(schema.GroupKind{Group: "apps", Kind: "Deployment"}) {
		t.Error("the zero allowlist allows a kind")
	}
	if all, _ := ParseKindAllowlist([]string{"*"}); !all.Allows(schema.GroupKind{Group: "x.io", Kind: "Y"}) {
		t.Error("* does not allow a kind")
	}
	for _, bad := range []string{"apps/deployment", "a/b/C", "apps/", "*/Kind", "a b/Kind"} {
		if _, err := ParseKindAllowlist([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
