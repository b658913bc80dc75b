package reload

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/reloader-operator/reloader/internal/source"
)

// ReloaderConfig rules add to the annotations: they bring in sources the annotations leave
// out, excluded ones included, but never those of an ignored kind or with the ignore
// annotation.
func TestConcernsWithConfigRules(t *testing.T) {
	keys := DefaultKeys()
	cm := func(name string) source.ID { return source.ID{Kind: source.ConfigMap, Name: name} }
	tier := labels.SelectorFromSet(labels.Set{"tier": "config"})
	configs := []ConfigRule{
		{Config: "by-name", Kind: source.ConfigMap, Name: "named"},
		{Config: "by-label", Kind: source.ConfigMap, Selector: tier},
		{Config: "auto", Kind: source.Secret, Auto: true},
	}
	tests := []struct {
		name   string
		meta   map[string]string
		policy Policy
		c      Candidate
		want   bool
		// why is a part of the reason
		why string
	}{
		{name: "named, not referenced", c: Candidate{ID: cm("named")}, want: true, why: "named by ReloaderConfig by-name"},
		{name: "named, missing source", c: Candidate{ID: cm("named")}, want: true, why: "by-name"},
		{name: "selected by label", c: Candidate{ID: cm("x"), Labels: map[string]string{"tier": "config"}, Annotations: map[string]string{}}, want: true, why: "selected by label in ReloaderConfig by-label"},
		{name: "label does not match", c: Candidate{ID: cm("x"), Labels: map[string]string{"tier": "web"}, Referenced: true}, why: string(ReasonNoRule)},
		{name: "auto needs a reference", c: Candidate{ID: source.ID{Kind: source.Secret, Name: "s"}}, why: string(ReasonNotReferenced)},
		{name: "auto, referenced", c: Candidate{ID: source.ID{Kind: source.Secret, Name: "s"}, Referenced: true}, want: true, why: "chosen by auto in ReloaderConfig auto"},
		{name: "kind must match", c: Candidate{ID: source.ID{Kind: source.Secret, Name: "named"}}, why: string(ReasonNotReferenced)},
		{name: "annotation first", meta: map[string]string{keys.Auto: "true"}, c: Candidate{ID: cm("named"), Referenced: true}, want: true, why: string(ReasonAuto)},
		{name: "config wins over exclude", meta: map[string]string{keys.Auto: "true", keys.Exclude[source.ConfigMap]: "named"}, c: Candidate{ID: cm("named"), Referenced: true}, want: true, why: "by-name"},
		{name: "config wins over auto false", meta: map[string]string{keys.Auto: "false"}, c: Candidate{ID: cm("named"), Referenced: true}, want: true, why: "by-name"},
		{name: "ignore annotation wins", c: Candidate{ID: cm("named"), Annotations: map[string]string{keys.Ignore: "true"}}, why: string(ReasonSourceIgnored)},
		{name: "ignored kind wins", policy: Policy{IgnoredKinds: map[source.Kind]bool{source.ConfigMap: true}}, c: Candidate{ID: cm("named")}, why: string(ReasonKindIgnored)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.policy.Keys = keys
			r, errs := ParseRules(keys, tt.meta, nil)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			r.Configs = configs
			got, why := tt.policy.Concerns(&r, tt.c)
			if got != tt.want || !strings.Contains(string(why), tt.why) {
				t.Errorf("Concerns = %v, %q; want %v, reason with %q", got, why, tt.want, tt.why)
			}
		})
	}
}

func TestConfigRulesHelpers(t *testing.T) {
	r := Rules{Configs: []ConfigRule{
		{Config: "a", Kind: source.ConfigMap, Name: "one"},
		{Config: "b", Kind: source.Secret, Selector: labels.Everything()},
	}}
	if got := r.ConfigLiterals(source.ConfigMap); len(got) != 1 || got[0] != "one" {
		t.Errorf("ConfigLiterals = %v", got)
	}
	if r.ConfigSelects(source.ConfigMap) || !r.ConfigSelects(source.Secret) {
		t.Error("ConfigSelects: only the Secret rule selects by label")
	}
	if !r.Opted() {
		t.Error("a config target is opted in")
	}
}

func TestKeysFor(t *testing.T) {
	cm := source.ID{Kind: source.ConfigMap, Name: "cfg"}
	spec := &corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Env: []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "a"}}}}}}}
	byName := func(keys []string, auto bool) ConfigRule {
		return ConfigRule{Config: "c", Kind: source.ConfigMap, Name: "cfg", Keys: keys, AutoKeys: auto}
	}
	tests := []struct {
		name  string
		rules []ConfigRule
		why   Reason
		want  []string
		// usedKeysOnly is the workload's reloader.dev/used-keys-only.
		usedKeysOnly bool
	}{
		{name: "listed keys", rules: []ConfigRule{byName([]string{"b", "a"}, false)}, why: ReasonConfigName, want: []string{"a", "b"}},
		{name: "union of two configs", rules: []ConfigRule{byName([]string{"a"}, false), byName([]string{"c"}, false)}, why: ReasonConfigName, want: []string{"a", "c"}},
		{name: "listed keys win over a rule without", rules: []ConfigRule{byName([]string{"a"}, false), byName(nil, false)}, why: ReasonConfigName, want: []string{"a"}},
		{name: "autoKeys and a rule without keys: whole", rules: []ConfigRule{byName(nil, true), byName(nil, false)}, why: ReasonConfigName},
		{name: "autoKeys: the keys the spec reads", rules: []ConfigRule{byName(nil, true)}, why: ReasonConfigName, want: []string{"a"}},
		{name: "annotations decide for a source they concern", rules: []ConfigRule{byName([]string{"a"}, false)}, why: ReasonAuto},
		{name: "the workload's used-keys-only wins over a config without keys", rules: []ConfigRule{byName(nil, false)}, why: ReasonConfigName, usedKeysOnly: true, want: []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Rules{Configs: tt.rules, UsedKeysOnly: tt.usedKeysOnly}
			got, restricted := r.KeysFor(Candidate{ID: cm, Referenced: true}, tt.why, spec)
			if restricted != (tt.want != nil) || !slices.Equal(got, tt.want) {
				t.Errorf("KeysFor = %v, %v; want %v", got, restricted, tt.want)
			}
		})
	}
}
