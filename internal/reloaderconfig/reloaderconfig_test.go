package reloaderconfig

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
)

func config(name string, spec v1alpha1.ReloaderConfigSpec) *v1alpha1.ReloaderConfig {
	return &v1alpha1.ReloaderConfig{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Generation: 1}, Spec: spec}
}

func TestCompileTargetsAndRules(t *testing.T) {
	c := Compile(config("shop", v1alpha1.ReloaderConfigSpec{
		Targets: []v1alpha1.Target{{Kind: "Deployment", Name: "web"}, {Kind: "StatefulSet", Selector: &v1alpha1.LabelSelector{MatchLabels: map[string]string{"team": "shop"}}}},
		Sources: []v1alpha1.Source{{Kind: "ConfigMap", Name: "cfg", Keys: []string{"a"}}, {Kind: "Secret", Auto: true, AutoKeys: true}},
	}))
	obj := func(name string, labels map[string]string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	checks := []struct {
		kind string
		obj  *appsv1.Deployment
		want bool
	}{
		{"Deployment", obj("web", nil), true},
		{"Deployment", obj("api", map[string]string{"team": "shop"}), false},
		{"StatefulSet", obj("db", map[string]string{"team": "shop"}), true},
		{"StatefulSet", obj("web", nil), false},
	}
	for _, ch := range checks {
		if got := c.TargetsWorkload(ch.kind, ch.obj); got != ch.want {
			t.Errorf("TargetsWorkload(%s %s) = %v, want %v", ch.kind, ch.obj.Name, got, ch.want)
		}
	}
	if len(c.Rules) != 2 || c.Rules[0].Kind != source.ConfigMap || c.Rules[0].Keys[0] != "a" || c.Rules[1].Kind != source.Secret || !c.Rules[1].AutoKeys {
		t.Errorf("rules = %+v", c.Rules)
	}
}

// A selector labels.Selector refuses (the schema refuses it too, but a config stored under an
// older CRD may hold one) chooses nothing and is reported; the rest of the config still applies.
func TestCompileKeepsTheRestOfABadConfig(t *testing.T) {
	c := Compile(config("bad", v1alpha1.ReloaderConfigSpec{
		Targets: []v1alpha1.Target{{Kind: "Deployment", Name: "web"}, {Kind: "Deployment", Selector: &v1alpha1.LabelSelector{
			MatchExpressions: []v1alpha1.LabelSelectorRequirement{{Key: "team", Operator: "Sometimes"}}}}},
		Sources: []v1alpha1.Source{{Kind: "ConfigMap", Name: "cfg"}},
	}))
	if len(c.Errs) != 1 || !strings.Contains(c.Errs[0].Error(), "spec.targets[1].selector") {
		t.Fatalf("errors = %v", c.Errs)
	}
	if c.TargetsWorkload("Deployment", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "other", Labels: map[string]string{"team": "x"}}}) {
		t.Error("the bad selector chose a workload")
	}
	if !c.TargetsWorkload("Deployment", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}}) {
		t.Error("the good target was lost")
	}
}

// all: true chooses every workload or source of the kind; a selector's expressions carry over.
func TestCompileAllAndExpressions(t *testing.T) {
	c := Compile(config("all", v1alpha1.ReloaderConfigSpec{
		Targets: []v1alpha1.Target{{Kind: "Deployment", All: true}, {Kind: "StatefulSet", Selector: &v1alpha1.LabelSelector{
			MatchExpressions: []v1alpha1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"db", "cache"}}}}}},
		Sources: []v1alpha1.Source{{Kind: "Secret", All: true}, {Kind: "ConfigMap", Name: "cfg"}},
	}))
	w := func(labels map[string]string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "w", Labels: labels}}
	}
	for _, ch := range []struct {
		kind   string
		labels map[string]string
		want   bool
	}{
		{"Deployment", nil, true},
		{"Deployment", map[string]string{"any": "thing"}, true},
		{"StatefulSet", map[string]string{"tier": "cache"}, true},
		{"StatefulSet", map[string]string{"tier": "web"}, false},
		{"DaemonSet", nil, false},
	} {
		if got := c.TargetsWorkload(ch.kind, w(ch.labels)); got != ch.want {
			t.Errorf("TargetsWorkload(%s %v) = %v, want %v", ch.kind, ch.labels, got, ch.want)
		}
	}
	if len(c.Errs) != 0 || len(c.Rules) != 2 || c.Rules[0].Selector == nil || !c.Rules[0].Selector.Empty() || c.Rules[1].Selector != nil {
		t.Errorf("rules %+v, errors %v: want every Secret, then cfg by name", c.Rules, c.Errs)
	}
}

// Configs that disagree resolve the same way whatever order they come in: the first by name.
func TestMergeIsOrderFreeAndReportsConflicts(t *testing.T) {
	a := Compile(config("a", v1alpha1.ReloaderConfigSpec{Strategy: "annotations", PausePeriod: &metav1.Duration{Duration: time.Minute},
		Sources: []v1alpha1.Source{{Kind: "ConfigMap", Name: "one"}}}))
	b := Compile(config("b", v1alpha1.ReloaderConfigSpec{Strategy: "env-vars", PausePeriod: &metav1.Duration{Duration: time.Minute},
		RunCronJobsOnReload: ptr.To(true), Sources: []v1alpha1.Source{{Kind: "ConfigMap", Name: "two"}}}))
	for _, order := range [][]*Compiled{{a, b}, {b, a}} {
		m := Merge(order)
		if _, ok := m.Overrides.Strategy.(reload.Annotations); !ok {
			t.Errorf("strategy %T, want a's annotations", m.Overrides.Strategy)
		}
		if m.Overrides.RunCronJobs == nil || !*m.Overrides.RunCronJobs || *m.Overrides.PausePeriod != time.Minute {
			t.Errorf("overrides %+v", m.Overrides)
		}
		if len(m.Conflicts) != 1 || m.Conflicts[0].Setting != "strategy" || m.Conflicts[0].Winner != "a" {
			t.Errorf("conflicts %v, want only strategy, won by a", m.Conflicts)
		}
		if len(m.Rules) != 2 || m.Rules[0].Name != "one" {
			t.Errorf("rules %+v, want a's first", m.Rules)
		}
	}
}

func TestCacheCompilesOncePerGeneration(t *testing.T) {
	var c Cache
	cfg := config("x", v1alpha1.ReloaderConfigSpec{Sources: []v1alpha1.Source{{Kind: "ConfigMap", Name: "one"}}})
	first := c.Get(cfg)
	if c.Get(cfg) != first {
		t.Error("compiled twice for one generation")
	}
	cfg.Generation = 2
	if c.Get(cfg) == first {
		t.Error("a new generation kept the old rules")
	}
	c.Forget(cfg.UID)
	if len(c.entries) != 0 {
		t.Errorf("Forget left %d entries", len(c.entries))
	}
}

// Pacing settings: a window that can't be read is reported and sets none; the interval and a
// good window merge as the other settings do, conflicts named.
func TestCompileAndMergePacing(t *testing.T) {
	src := []v1alpha1.Source{{Kind: "ConfigMap", Name: "cfg"}}
	bad := Compile(config("bad", v1alpha1.ReloaderConfigSpec{Sources: src, ReloadWindow: "weekdays 2am"}))
	if len(bad.Errs) != 1 || !strings.Contains(bad.Errs[0].Error(), "spec.reloadWindow") || !strings.Contains(bad.Errs[0].Error(), "HH:MM-HH:MM") || bad.Overrides.ReloadWindow != "" {
		t.Errorf("errors %v, window %q; want one naming spec.reloadWindow and the form, and no window", bad.Errs, bad.Overrides.ReloadWindow)
	}
	a := Compile(config("a", v1alpha1.ReloaderConfigSpec{Sources: src, ReloadWindow: "daily 02:00-04:00 UTC",
		MinReloadInterval: &metav1.Duration{Duration: time.Hour}}))
	b := Compile(config("b", v1alpha1.ReloaderConfigSpec{Sources: src, ReloadWindow: "Sat 02:00-04:00 UTC",
		MinReloadInterval: &metav1.Duration{Duration: time.Hour}}))
	for _, order := range [][]*Compiled{{a, b}, {b, a}} {
		m := Merge(order)
		if m.Overrides.ReloadWindow != "daily 02:00-04:00 UTC" || m.Overrides.MinReloadInterval == nil || *m.Overrides.MinReloadInterval != time.Hour {
			t.Errorf("overrides %+v, want a's window and the interval", m.Overrides)
		}
		if len(m.Conflicts) != 1 || m.Conflicts[0].Setting != "reloadWindow" || m.Conflicts[0].Winner != "a" {
			t.Errorf("conflicts %v, want only reloadWindow, won by a", m.Conflicts)
		}
	}
}

// Selectors the CRD's schema refuses, stored before the CRD had the rule (or under a CRD
// that helm upgrade left as it was), are refused again when compiled: they choose nothing
// (an empty one would otherwise choose everything) and are reported; the rest still applies.
func TestCompileRefusesSelectorsOutOfBounds(t *testing.T) {
	many := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("k%d", i)] = "v"
		}
		return m
	}
	exprs := func(n, values int) []v1alpha1.LabelSelectorRequirement {
		var out []v1alpha1.LabelSelectorRequirement
		for i := range n {
			e := v1alpha1.LabelSelectorRequirement{Key: fmt.Sprintf("k%d", i), Operator: metav1.LabelSelectorOpNotIn}
			for j := range values {
				e.Values = append(e.Values, fmt.Sprintf("v%d", j))
			}
			out = append(out, e)
		}
		return out
	}
	long := func(n int) string { return strings.Repeat("a", n) }
	for _, tc := range []struct {
		name string
		sel  v1alpha1.LabelSelector
		want string // in the error; "" for none
	}{
		{"empty", v1alpha1.LabelSelector{}, "empty selector"},
		{"empty maps", v1alpha1.LabelSelector{MatchLabels: map[string]string{}, MatchExpressions: []v1alpha1.LabelSelectorRequirement{}}, "empty selector"},
		{"labels at the bound", v1alpha1.LabelSelector{MatchLabels: many(v1alpha1.MaxMatchLabels)}, ""},
		{"too many labels", v1alpha1.LabelSelector{MatchLabels: many(v1alpha1.MaxMatchLabels + 1)}, "matchLabels"},
		{"expressions at the bound", v1alpha1.LabelSelector{MatchExpressions: exprs(v1alpha1.MaxMatchExpressions, v1alpha1.MaxSelectorValues)}, ""},
		{"too many expressions", v1alpha1.LabelSelector{MatchExpressions: exprs(v1alpha1.MaxMatchExpressions+1, 1)}, "matchExpressions"},
		{"too many values", v1alpha1.LabelSelector{MatchExpressions: exprs(1, v1alpha1.MaxSelectorValues+1)}, "values"},
		{"label value too long", v1alpha1.LabelSelector{MatchLabels: map[string]string{"k": long(v1alpha1.MaxLabelValueLength + 1)}}, "value"},
		{"expression key too long", v1alpha1.LabelSelector{MatchExpressions: []v1alpha1.LabelSelectorRequirement{
			{Key: long(254) + "/" + long(v1alpha1.MaxLabelKeyLength-254), Operator: metav1.LabelSelectorOpExists}}}, "key"},
		{"expression value too long", v1alpha1.LabelSelector{MatchExpressions: []v1alpha1.LabelSelectorRequirement{
			{Key: "k", Operator: metav1.LabelSelectorOpIn, Values: []string{long(v1alpha1.MaxLabelValueLength + 1)}}}}, "value"},
	} {
		sel := tc.sel
		c := Compile(config("c", v1alpha1.ReloaderConfigSpec{
			Targets: []v1alpha1.Target{{Kind: "Deployment", Name: "web"}, {Kind: "Deployment", Selector: &sel}},
			Sources: []v1alpha1.Source{{Kind: "ConfigMap", Name: "cfg"}, {Kind: "Secret", Selector: &sel}},
		}))
		unlabelled := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "other"}}
		if tc.want == "" {
			if len(c.Errs) != 0 {
				t.Errorf("%s: errors %v, want none", tc.name, c.Errs)
			}
			continue
		}
		if len(c.Errs) != 2 || !strings.Contains(c.Errs[0].Error(), "spec.targets[1].selector") || !strings.Contains(c.Errs[0].Error(), tc.want) ||
			!strings.Contains(c.Errs[1].Error(), "spec.sources[1].selector") {
			t.Errorf("%s: errors %v; want one for spec.targets[1].selector and one for spec.sources[1].selector, saying %q", tc.name, c.Errs, tc.want)
		}
		if c.TargetsWorkload("Deployment", unlabelled) {
			t.Errorf("%s: the refused selector chose a workload", tc.name)
		}
		if !c.TargetsWorkload("Deployment", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}}) {
			t.Errorf("%s: the good target was lost", tc.name)
		}
		if len(c.Rules) != 2 || c.Rules[1].Selector == nil || c.Rules[1].Selector.Matches(labels.Set{"k0": "v"}) {
			t.Errorf("%s: rules %+v; want the refused source selector to choose nothing", tc.name, c.Rules)
		}
	}
}

// The mode: one the schema would refuse (stored under an older CRD) is reported and sets
// none; two configs that disagree merge as the other settings do, the conflict named.
func TestCompileAndMergeMode(t *testing.T) {
	src := []v1alpha1.Source{{Kind: "ConfigMap", Name: "cfg"}}
	bad := Compile(config("bad", v1alpha1.ReloaderConfigSpec{Sources: src, Mode: "ask"}))
	if len(bad.Errs) != 1 || !strings.Contains(bad.Errs[0].Error(), "spec.mode") || !strings.Contains(bad.Errs[0].Error(), "reload, notify or approve") || bad.Overrides.Mode != "" {
		t.Errorf("errors %v, mode %q; want one naming spec.mode and the modes, and no mode", bad.Errs, bad.Overrides.Mode)
	}
	a := Compile(config("a", v1alpha1.ReloaderConfigSpec{Sources: src, Mode: "approve"}))
	b := Compile(config("b", v1alpha1.ReloaderConfigSpec{Sources: src, Mode: "notify"}))
	for _, order := range [][]*Compiled{{a, b}, {b, a}} {
		m := Merge(order)
		if m.Overrides.Mode != "approve" {
			t.Errorf("mode %q, want a's approve", m.Overrides.Mode)
		}
		if len(m.Conflicts) != 1 || m.Conflicts[0].Setting != "mode" || m.Conflicts[0].Winner != "a" {
			t.Errorf("conflicts %v, want only mode, won by a", m.Conflicts)
		}
	}
}

// spec.waves merges as the other settings do: the first config by name wins, the conflict named.
func TestMergeWaves(t *testing.T) {
	src := []v1alpha1.Source{{Kind: "ConfigMap", Name: "cfg"}}
	on, off := true, false
	a := Compile(config("a", v1alpha1.ReloaderConfigSpec{Sources: src, Waves: &on}))
	b := Compile(config("b", v1alpha1.ReloaderConfigSpec{Sources: src, Waves: &off}))
	for _, order := range [][]*Compiled{{a, b}, {b, a}} {
		m := Merge(order)
		if m.Overrides.Waves == nil || !*m.Overrides.Waves {
			t.Errorf("waves %v, want a's true", m.Overrides.Waves)
		}
		if len(m.Conflicts) != 1 || m.Conflicts[0].Setting != "waves" || m.Conflicts[0].Winner != "a" {
			t.Errorf("conflicts %v, want only waves, won by a", m.Conflicts)
		}
	}
}

// A namespace's configs are weighed in name order, up to MaxNamespaceConfigs and while
// their targets add up to MaxNamespaceTargets; the rest are left out whole.
func TestConsideredKeepsANamespaceWithinItsLimits(t *testing.T) {
	withTargets := func(name string, n int) *Compiled {
		c := &Compiled{Name: name}
		for range n {
			c.Targets = append(c.Targets, Target{Kind: "Deployment", Selector: labels.Everything()})
		}
		return c
	}
	names := func(cs []*Compiled) string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return strings.Join(out, ",")
	}
	// 20 configs of 64 targets: 8 fill the 512 targets.
	var many []*Compiled
	for i := 19; i >= 0; i-- {
		many = append(many, withTargets(fmt.Sprintf("c%02d", i), 64))
	}
	kept, left := Considered(many)
	if len(kept) != MaxNamespaceTargets/64 || kept[0].Name != "c00" || len(left) != 20-len(kept) || left[0].Name != fmt.Sprintf("c%02d", len(kept)) {
		t.Errorf("kept %s, left %s; want c00 to c07 kept, by name", names(kept), names(left))
	}
	// Small configs: the count bounds them.
	var small []*Compiled
	for i := range MaxNamespaceConfigs + 3 {
		small = append(small, withTargets(fmt.Sprintf("s%03d", i), 1))
	}
	if kept, left := Considered(small); len(kept) != MaxNamespaceConfigs || len(left) != 3 || names(left) != "s064,s065,s066" {
		t.Errorf("kept %d, left %s; want %d kept and s064 to s066 left", len(kept), names(left), MaxNamespaceConfigs)
	}
	if kept, left := Considered([]*Compiled{withTargets("b", 3), withTargets("a", 2)}); names(kept) != "a,b" || left != nil {
		t.Errorf("kept %s, left %s; want a,b and none left", names(kept), names(left))
	}
}
