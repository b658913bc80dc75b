package reload

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/testutil"
)

func TestEnvVarName(t *testing.T) {
	tests := []struct {
		id   source.ID
		want string
	}{
		{source.ID{Kind: source.ConfigMap, Name: "app-config"}, "STAKATER_APP_CONFIG_CONFIGMAP"},
		{source.ID{Kind: source.Secret, Name: "db.creds--v2"}, "STAKATER_DB_CREDS_V2_SECRET"},
		{source.ID{Kind: source.SecretProviderClass, Name: "vault"}, "STAKATER_VAULT_SECRETPROVIDERCLASS"},
		{source.ID{Kind: source.ConfigMap, Name: "1st"}, "STAKATER_1ST_CONFIGMAP"},
	}
	for _, tt := range tests {
		if got := EnvVarName(tt.id); got != tt.want {
			t.Errorf("EnvVarName(%v) = %q, want %q", tt.id, got, tt.want)
		}
	}
}

func TestParseRulesReportsBadValuesAndKeepsTheRest(t *testing.T) {
	keys := DefaultKeys()
	meta := map[string]string{
		keys.Reload[source.ConfigMap]: "good, bad-[, other-.*",
		keys.Auto:                     "yes please",
	}
	r, errs := ParseRules(keys, meta, nil)
	if len(errs) != 2 {
		t.Fatalf("want 2 errors (bad regex, bad bool), got %v", errs)
	}
	if !strings.Contains(errs[0].Error()+errs[1].Error(), "bad-[") {
		t.Errorf("errors do not name the bad entry: %v", errs)
	}
	if n := r.Named[source.ConfigMap]; len(n.Literals()) != 1 || n.Patterns() != 1 {
		t.Errorf("kept %v and %d patterns, want [good] and 1", n.Literals(), n.Patterns())
	}
	if r.Auto != nil {
		t.Errorf("invalid auto value parsed as %v", *r.Auto)
	}
	if got := r.Literal[source.ConfigMap]; !slices.Equal(got, []string{"good"}) {
		t.Errorf("literal names = %v, want [good]", got)
	}
}

func TestConcerns(t *testing.T) {
	keys := DefaultKeys()
	cm := func(name string) source.ID { return source.ID{Kind: source.ConfigMap, Name: name} }
	sec := func(name string) source.ID { return source.ID{Kind: source.Secret, Name: name} }
	tests := []struct {
		name       string
		meta       map[string]string
		template   map[string]string
		policy     Policy
		cand       Candidate
		want       bool
		wantReason Reason
	}{
		{"auto, referenced", map[string]string{keys.Auto: "true"}, nil, Policy{}, Candidate{ID: cm("a"), Referenced: true}, true, ReasonAuto},
		{"auto, not referenced", map[string]string{keys.Auto: "true"}, nil, Policy{}, Candidate{ID: cm("a")}, false, ReasonNotReferenced},
		{"no annotation", nil, nil, Policy{}, Candidate{ID: cm("a"), Referenced: true}, false, ReasonNoRule},
		{"typed auto matches its kind", map[string]string{keys.TypedAuto[source.ConfigMap]: "true"}, nil, Policy{}, Candidate{ID: cm("a"), Referenced: true}, true, ReasonTypedAuto},
		{"typed auto ignores other kind", map[string]string{keys.TypedAuto[source.ConfigMap]: "true"}, nil, Policy{}, Candidate{ID: sec("a"), Referenced: true}, false, ReasonNoRule},
		{"named regex, anchored", map[string]string{keys.Reload[source.ConfigMap]: "app-.*,other"}, nil, Policy{}, Candidate{ID: cm("app-1")}, true, ReasonNamed},
		{"named regex does not match a substring", map[string]string{keys.Reload[source.ConfigMap]: "app"}, nil, Policy{}, Candidate{ID: cm("my-app-1")}, false, ReasonNotReferenced},
		{"named for configmaps does not name secrets", map[string]string{keys.Reload[source.ConfigMap]: "app"}, nil, Policy{}, Candidate{ID: sec("app")}, false, ReasonNotReferenced},
		{"search + match", map[string]string{keys.Search: "true"}, nil, Policy{}, Candidate{ID: cm("a"), Referenced: true, Annotations: map[string]string{keys.Match: "true"}}, true, ReasonSearch},
		{"search without match", map[string]string{keys.Search: "true"}, nil, Policy{}, Candidate{ID: cm("a"), Referenced: true}, false, ReasonNoRule},
		{"source ignore wins over named", map[string]string{keys.Reload[source.ConfigMap]: "a"}, nil, Policy{}, Candidate{ID: cm("a"), Annotations: map[string]string{keys.Ignore: "true"}}, false, ReasonSourceIgnored},
		{"exclude wins over auto", map[string]string{keys.Auto: "true", keys.Exclude[source.ConfigMap]: "a,b"}, nil, Policy{}, Candidate{ID: cm("b"), Referenced: true}, false, ReasonExcluded},
		{"exclude wins over named", map[string]string{keys.Reload[source.ConfigMap]: "b", keys.Exclude[source.ConfigMap]: "b"}, nil, Policy{}, Candidate{ID: cm("b")}, false, ReasonExcluded},
		{"template annotation is the fallback", nil, map[string]string{keys.Auto: "true"}, Policy{}, Candidate{ID: cm("a"), Referenced: true}, true, ReasonAuto},
		{"metadata wins over template", map[string]string{keys.Auto: "false"}, map[string]string{keys.Auto: "true"}, Policy{AutoReloadAll: true}, Candidate{ID: cm("a"), Referenced: true}, false, ReasonOptedOut},
		{"auto-reload-all", nil, nil, Policy{AutoReloadAll: true}, Candidate{ID: sec("a"), Referenced: true}, true, ReasonAutoReloadAll},
		{"auto-reload-all, auto false opts out", map[string]string{keys.Auto: "false"}, nil, Policy{AutoReloadAll: true}, Candidate{ID: cm("a"), Referenced: true}, false, ReasonOptedOut},
		{"auto-reload-all, typed auto false opts out that kind", map[string]string{keys.TypedAuto[source.Secret]: "false"}, nil, Policy{AutoReloadAll: true}, Candidate{ID: sec("a"), Referenced: true}, false, ReasonNoRule},
		{"auto-reload-all, typed auto of other kind set", map[string]string{keys.TypedAuto[source.ConfigMap]: "true"}, nil, Policy{AutoReloadAll: true}, Candidate{ID: sec("a"), Referenced: true}, true, ReasonAutoReloadAll},
		{"ignored kind", map[string]string{keys.Auto: "true"}, nil, Policy{IgnoredKinds: map[source.Kind]bool{source.Secret: true}}, Candidate{ID: sec("a"), Referenced: true}, false, ReasonKindIgnored},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.policy.Keys = keys
			r, errs := ParseRules(keys, tt.meta, tt.template)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			got, reason := tt.policy.Concerns(&r, tt.cand)
			if got != tt.want || reason != tt.wantReason {
				t.Errorf("Concerns() = %v (%s), want %v (%s)", got, reason, tt.want, tt.wantReason)
			}
		})
	}
}

func TestDiff(t *testing.T) {
	a := source.ID{Kind: source.ConfigMap, Name: "a"}
	b := source.ID{Kind: source.Secret, Name: "b"}
	spc := source.ID{Kind: source.SecretProviderClass, Name: "vault"}
	v1, v2 := hash.Versions([]string{"k=1"}), hash.Versions([]string{"k=2"})
	both := hash.Versions([]string{"k=1", "k=2"})
	all := Events{OnCreate: true, OnDelete: true}
	tests := []struct {
		name        string
		last        Record
		hasRecord   bool
		current     map[source.ID]string
		ev          Events
		wantChanged []source.ID
		wantNext    Record
	}{
		{"first sight records, never reloads", nil, false, map[source.ID]string{a: "1"}, all, nil, Record{"configmap/a": "1"}},
		{"first sight of a missing source records it absent", nil, false, map[source.ID]string{a: Absent}, all, nil, Record{"configmap/a": ""}},
		{"unchanged", Record{"configmap/a": "1"}, true, map[source.ID]string{a: "1"}, Events{}, nil, Record{"configmap/a": "1"}},
		{"changed", Record{"configmap/a": "1", "secret/b": "x"}, true, map[source.ID]string{a: "2", b: "x"}, Events{}, []source.ID{a}, Record{"configmap/a": "2", "secret/b": "x"}},
		{"two changed, in order", Record{"configmap/a": "1", "secret/b": "x"}, true, map[source.ID]string{b: "y", a: "2"}, Events{}, []source.ID{a, b}, Record{"configmap/a": "2", "secret/b": "y"}},
		{"new source only recorded", Record{"configmap/a": "1"}, true, map[source.ID]string{a: "1", b: "x"}, all, nil, Record{"configmap/a": "1", "secret/b": "x"}},
		{"source no longer concerned is forgotten", Record{"configmap/a": "1", "secret/b": "x"}, true, map[source.ID]string{a: "1"}, all, nil, Record{"configmap/a": "1"}},
		{"created: recorded only", Record{"configmap/a": ""}, true, map[source.ID]string{a: "1"}, Events{}, nil, Record{"configmap/a": "1"}},
		{"created: reloads on create", Record{"configmap/a": ""}, true, map[source.ID]string{a: "1"}, Events{OnCreate: true}, []source.ID{a}, Record{"configmap/a": "1"}},
		{"deleted: keeps the last hash", Record{"configmap/a": "1"}, true, map[source.ID]string{a: Absent}, Events{OnCreate: true}, nil, Record{"configmap/a": "1"}},
		{"deleted: reloads on delete", Record{"configmap/a": "1"}, true, map[source.ID]string{a: Absent}, Events{OnDelete: true}, []source.ID{a}, Record{"configmap/a": ""}},
		{"deleted then re-created with the same content", Record{"configmap/a": "1"}, true, map[source.ID]string{a: "1"}, Events{}, nil, Record{"configmap/a": "1"}},
		{"still absent", Record{"configmap/a": ""}, true, map[source.ID]string{a: Absent}, all, nil, Record{"configmap/a": ""}},
		{"csi: a new version reloads", Record{"secretproviderclass/vault": v1}, true, map[source.ID]string{spc: both}, Events{}, []source.ID{spc}, Record{"secretproviderclass/vault": both}},
		{"csi: old versions going away do not", Record{"secretproviderclass/vault": both}, true, map[source.ID]string{spc: v2}, Events{}, nil, Record{"secretproviderclass/vault": v2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			changed, next := Diff(tt.last, tt.hasRecord, tt.current, tt.ev)
			if !slices.Equal(changed, tt.wantChanged) || !next.Equal(tt.wantNext) {
				t.Errorf("Diff() = %v, %v; want %v, %v", changed, next, tt.wantChanged, tt.wantNext)
			}
		})
	}
}

func TestRecordRoundTrip(t *testing.T) {
	r := Record{"secret/b": "2", "configmap/a": "1"}
	got, err := ParseRecord(r.Encode())
	if err != nil || !got.Equal(r) {
		t.Fatalf("round trip = %v, %v", got, err)
	}
	if r.Encode() != `{"configmap/a":"1","secret/b":"2"}` {
		t.Errorf("encoding not sorted: %s", r.Encode())
	}
	if _, err := ParseRecord("not json"); err == nil {
		t.Error("ParseRecord accepted garbage")
	}
}

func TestEnvVarsStrategy(t *testing.T) {
	tpl := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "app", Env: []corev1.EnvVar{{Name: "STAKATER_CFG_CONFIGMAP", Value: "old"}}},
		{Name: "side"},
	}}}
	EnvVars{}.Apply(tpl, "ns", []Change{
		{ID: source.ID{Kind: source.ConfigMap, Name: "cfg"}, Hash: "new", Containers: []string{"app"}},
		{ID: source.ID{Kind: source.Secret, Name: "s"}, Hash: "h", Containers: []string{"app", "side"}},
	})
	wantApp := []corev1.EnvVar{{Name: "STAKATER_CFG_CONFIGMAP", Value: "new"}, {Name: "STAKATER_S_SECRET", Value: "h"}}
	if !reflect.DeepEqual(tpl.Spec.Containers[0].Env, wantApp) {
		t.Errorf("app env = %v, want %v", tpl.Spec.Containers[0].Env, wantApp)
	}
	wantSide := []corev1.EnvVar{{Name: "STAKATER_S_SECRET", Value: "h"}}
	if !reflect.DeepEqual(tpl.Spec.Containers[1].Env, wantSide) {
		t.Errorf("side env = %v, want %v", tpl.Spec.Containers[1].Env, wantSide)
	}

	EnvVars{}.Apply(tpl, "ns", []Change{{ID: source.ID{Kind: source.Secret, Name: "s"}, Hash: Absent, Containers: []string{"app", "side"}}})
	wantApp = wantApp[:1]
	if !reflect.DeepEqual(tpl.Spec.Containers[0].Env, wantApp) || len(tpl.Spec.Containers[1].Env) != 0 {
		t.Errorf("after deletion env = %v / %v, want %v / none", tpl.Spec.Containers[0].Env, tpl.Spec.Containers[1].Env, wantApp)
	}
}

func TestAnnotationsStrategy(t *testing.T) {
	tpl := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}
	Annotations{}.Apply(tpl, "ns", []Change{{ID: source.ID{Kind: source.Secret, Name: "db"}, Hash: "h1", Containers: []string{"app"}}})
	var got LastReloaded
	testutil.Must(t, json.Unmarshal([]byte(tpl.Annotations[LastReloadedFrom]), &got))
	want := LastReloaded{Type: "SECRET", Name: "db", Namespace: "ns", Hash: "h1", ContainerRefs: []string{"app"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("annotation = %+v, want %+v", got, want)
	}
	if len(tpl.Spec.Containers[0].Env) != 0 {
		t.Error("annotations strategy touched containers")
	}
}

func TestTargetContainers(t *testing.T) {
	spec := &corev1.PodSpec{Containers: []corev1.Container{{Name: "first"}, {Name: "second"}}}
	if got := TargetContainers(&source.Ref{Containers: []string{"second"}}, spec); !slices.Equal(got, []string{"second"}) {
		t.Errorf("user containers: %v", got)
	}
	if got := TargetContainers(&source.Ref{InitContainers: []string{"init"}}, spec); !slices.Equal(got, []string{"first"}) {
		t.Errorf("init only: %v", got)
	}
	if got := TargetContainers(nil, spec); !slices.Equal(got, []string{"first"}) {
		t.Errorf("named only: %v", got)
	}
}
