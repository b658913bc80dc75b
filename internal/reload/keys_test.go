package reload

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/testutil"
)

func TestParseKeyList(t *testing.T) {
	tests := []struct {
		name    string
		value   string
		want    map[string][]string
		errs    int
		errText string
	}{
		{"one entry", "app-config/LOG_LEVEL", map[string][]string{"app-config": {"LOG_LEVEL"}}, 0, ""},
		{"spaces, repeats and order", " app-config/FEATURE_X , app-config/LOG_LEVEL,app-config/FEATURE_X,, db/password ",
			map[string][]string{"app-config": {"FEATURE_X", "LOG_LEVEL"}, "db": {"password"}}, 0, ""},
		{"keys with dots and dashes", "cfg/app.yaml,cfg/.hidden,cfg/a-b_c", map[string][]string{"cfg": {".hidden", "a-b_c", "app.yaml"}}, 0, ""},
		{"no slash", "cfg", nil, 1, "not <name>/<key>"},
		{"bad name, the rest applies", "Bad_Name/k, cfg/a", map[string][]string{"cfg": {"a"}}, 1, "not an object name"},
		{"bad key", "cfg/a/b, cfg/sp ace, cfg/", nil, 3, "not a valid key"},
		{"key too long", "cfg/" + strings.Repeat("k", 254), nil, 1, "not a valid key"},
		{"many bad entries are reported briefly", strings.Repeat("x,", 10), nil, 4, "and 7 more"},
		{"too many entries", strings.Repeat("c/k,", MaxEntries+1), nil, 1, "whole annotation is ignored"},
		{"too long", "c/" + strings.Repeat("k", MaxValueBytes), nil, 1, "whole annotation is ignored"},
		{"empty", " , ", nil, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := parseKeyList(tt.value)
			if !reflect.DeepEqual(l.keys, tt.want) {
				t.Errorf("keys = %v, want %v", l.keys, tt.want)
			}
			if len(l.errs) != tt.errs {
				t.Fatalf("errors %v, want %d", l.errs, tt.errs)
			}
			if tt.errs > 0 && !strings.Contains(fmt.Sprint(l.errs), tt.errText) {
				t.Errorf("errors %v do not say %q", l.errs, tt.errText)
			}
		})
	}
}

// The cache's cost of a parsed list does not underestimate what it holds.
func TestKeyListCost(t *testing.T) {
	var b strings.Builder
	for i := range MaxEntries {
		fmt.Fprintf(&b, "source-%d/key-%d,", i%7, i)
	}
	v := b.String()
	l := parseKeyList(v)
	if len(l.errs) > 0 || l.Len() != 7 {
		t.Fatalf("parsed %d sources, errors %v", l.Len(), l.errs)
	}
	if held := testutil.RetainedBy(func() any { return parseKeyList(v) }); uint64(l.size()) < held/2 {
		t.Errorf("cache cost %d underestimates the %d bytes a parse holds", l.size(), held)
	}
}

func TestParseRulesReadsKeyAnnotationsOncePerValue(t *testing.T) {
	keys := DefaultKeys()
	value := "cfg/a, cfg/b, db/password, bad"
	meta := map[string]string{ConfigMapKeysAnnotation: value, UsedKeysOnlyAnnotation: "true"}
	c := NewCaches()
	first, errs := c.ParseRules(keys, meta, nil)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), ConfigMapKeysAnnotation) {
		t.Errorf("errors %v, want one naming %s", errs, ConfigMapKeysAnnotation)
	}
	if !first.UsedKeysOnly {
		t.Error("used-keys-only not read")
	}
	// The template's annotations count too, key by key, as for the other rules.
	again, _ := c.ParseRules(keys, nil, map[string]string{ConfigMapKeysAnnotation: value})
	if again.KeyLists[source.ConfigMap] != first.KeyLists[source.ConfigMap] {
		t.Error("the same value was parsed twice")
	}
	if again.UsedKeysOnly || again.KeyLists[source.Secret] != nil {
		t.Errorf("rules not in the annotations were set: %+v", again)
	}
	if bad, errs := ParseRules(keys, map[string]string{UsedKeysOnlyAnnotation: "sure"}, nil); bad.UsedKeysOnly || len(errs) != 1 {
		t.Errorf("bad used-keys-only value: set %v, errors %v", bad.UsedKeysOnly, errs)
	}
}

func TestKeysOf(t *testing.T) {
	keys := DefaultKeys()
	cm := func(name string) source.ID { return source.ID{Kind: source.ConfigMap, Name: name} }
	spec := &corev1.PodSpec{Containers: []corev1.Container{{
		Name: "app",
		Env: []corev1.EnvVar{
			{Name: "LEVEL", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "level"}}},
			{Name: "PW", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "pw"}}},
		},
		EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "env"}}}},
	}}}
	tests := []struct {
		name           string
		meta           map[string]string
		id             source.ID
		want           []string
		wantRestricted bool
	}{
		{"no annotation: whole", nil, cm("cfg"), nil, false},
		{"used keys of a valueFrom", map[string]string{UsedKeysOnlyAnnotation: "true"}, cm("cfg"), []string{"level"}, true},
		{"used keys of a Secret", map[string]string{UsedKeysOnlyAnnotation: "true"}, source.ID{Kind: source.Secret, Name: "db"}, []string{"pw"}, true},
		{"used keys: envFrom is whole", map[string]string{UsedKeysOnlyAnnotation: "true"}, cm("env"), nil, false},
		{"used keys: a source the spec does not read is whole", map[string]string{UsedKeysOnlyAnnotation: "true"}, cm("named-only"), nil, false},
		{"used-keys-only false", map[string]string{UsedKeysOnlyAnnotation: "false"}, cm("cfg"), nil, false},
		{"explicit list", map[string]string{ConfigMapKeysAnnotation: "cfg/a,cfg/b"}, cm("cfg"), []string{"a", "b"}, true},
		{"explicit list wins over used keys, even over envFrom", map[string]string{UsedKeysOnlyAnnotation: "true", ConfigMapKeysAnnotation: "env/x"}, cm("env"), []string{"x"}, true},
		{"explicit list of another source", map[string]string{ConfigMapKeysAnnotation: "other/a"}, cm("cfg"), nil, false},
		{"a ConfigMap list does not name Secrets", map[string]string{ConfigMapKeysAnnotation: "db/other"}, source.ID{Kind: source.Secret, Name: "db"}, nil, false},
		{"Secret list", map[string]string{SecretKeysAnnotation: "db/pw2"}, source.ID{Kind: source.Secret, Name: "db"}, []string{"pw2"}, true},
		{"a SecretProviderClass has no keys", map[string]string{UsedKeysOnlyAnnotation: "true"}, source.ID{Kind: source.SecretProviderClass, Name: "cfg"}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, errs := ParseRules(keys, tt.meta, nil)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			got, restricted := r.KeysOf(tt.id, spec)
			if !reflect.DeepEqual(got, tt.want) || restricted != tt.wantRestricted {
				t.Errorf("KeysOf(%v) = %v, %v; want %v, %v", tt.id, got, restricted, tt.want, tt.wantRestricted)
			}
		})
	}
}

// A key set edit records the new hash without reloading; a content change under the same key
// set reloads; a subset hash over a whole one (the annotation just added) records only.
func TestDiffOfKeySets(t *testing.T) {
	id := source.ID{Kind: source.ConfigMap, Name: "cfg"}
	digests := hash.ConfigMapKeys(&corev1.ConfigMap{Data: map[string]string{"a": "1", "b": "2"}})
	changedB := hash.ConfigMapKeys(&corev1.ConfigMap{Data: map[string]string{"a": "1", "b": "3"}})
	whole := hash.ConfigMap(&corev1.ConfigMap{Data: map[string]string{"a": "1", "b": "2"}})
	tests := []struct {
		name      string
		last, now string
		reload    bool
	}{
		{"same keys, other key changed", hash.Subset("", digests, []string{"a"}), hash.Subset("", changedB, []string{"a"}), false},
		{"same keys, listed key changed", hash.Subset("", digests, []string{"b"}), hash.Subset("", changedB, []string{"b"}), true},
		{"key set edited, content changed too", hash.Subset("", digests, []string{"a"}), hash.Subset("", changedB, []string{"a", "b"}), false},
		{"restriction added", whole, hash.Subset("", changedB, []string{"b"}), false},
		{"restriction removed", hash.Subset("", digests, []string{"a"}), whole, false},
	}
	for _, tt := range tests {
		changed, next := Diff(Record{id.String(): tt.last}, true, map[source.ID]string{id: tt.now}, Events{})
		if (len(changed) > 0) != tt.reload {
			t.Errorf("%s: changed %v, want reload %v", tt.name, changed, tt.reload)
		}
		if next[id.String()] != tt.now {
			t.Errorf("%s: recorded %q, want %q", tt.name, next[id.String()], tt.now)
		}
	}
}

// FuzzKeyList checks the keys annotation parser: within its limits for any value, every kept
// entry is a valid name and key, and a value without errors keeps what it names.
func FuzzKeyList(f *testing.F) {
	for _, seed := range []string{
		"app-config/LOG_LEVEL, app-config/FEATURE_X",
		"a/b/c,/k,n/,,x",
		" cfg/.dot , db/pass-word_1 ",
		strings.Repeat("c/k,", 300),
		"\x00/\xff,é/é",
		"Cfg/a,cfg/" + strings.Repeat("k", 300),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		l := parseKeyList(v)
		if l.Len() > MaxEntries || len(l.errs) > maxReported+1 {
			t.Fatalf("past the limits: %d sources, %d errors", l.Len(), len(l.errs))
		}
		entries := 0
		for name, keys := range l.keys {
			if len(validation.IsDNS1123Subdomain(name)) > 0 {
				t.Fatalf("kept name %q", name)
			}
			for _, k := range keys {
				if len(validation.IsConfigMapKey(k)) > 0 {
					t.Fatalf("kept key %q of %q", k, name)
				}
				if !strings.Contains(v, name+"/"+k) {
					t.Fatalf("kept %s/%s, which the value does not hold", name, k)
				}
			}
			entries += len(keys)
		}
		if len(l.errs) == 0 && entries == 0 && strings.Contains(v, "/") && len(v) <= MaxValueBytes {
			t.Fatalf("value %q without errors kept nothing", v)
		}
	})
}
