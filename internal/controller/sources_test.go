package controller

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/workload"
)

func TestTransformKeepsOnlyHashesAndIsIdempotent(t *testing.T) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "c", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Data:       map[string]string{"k": "v"},
		BinaryData: map[string][]byte{"b": {1}},
	}
	want, wantKeys := hash.ConfigMap(cm), hash.ConfigMapKeys(cm)
	for pass := 1; pass <= 2; pass++ {
		out, err := ConfigMaps.Transform(cm)
		if err != nil {
			t.Fatal(err)
		}
		got := out.(*corev1.ConfigMap)
		if !maps.Equal(got.Data, wantKeys) || got.BinaryData != nil || got.ManagedFields != nil {
			t.Fatalf("pass %d: content or managed fields kept in cache: %+v", pass, got)
		}
		if h := ConfigMaps.contentHash(got); h != want {
			t.Fatalf("pass %d: hash %s, want %s", pass, h, want)
		}
	}

	key, err := hash.NewKey(make([]byte, hash.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	secrets := Secrets(key)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", UID: "u1"}, Data: map[string][]byte{"p": []byte("x")}}
	want, wantUID, wantKeys := hash.Secret(key, s), hash.UIDKeyedSecret(s), hash.SecretKeys(key, s)
	for pass := 1; pass <= 2; pass++ {
		out, _ := secrets.Transform(s)
		got := out.(*corev1.Secret)
		if len(got.Data) != 1 || string(got.Data["p"]) != wantKeys["p"] || secrets.contentHash(got) != want || secrets.uidHash(got) != wantUID {
			t.Fatalf("pass %d: secret data kept or hash wrong: %q", pass, got.Data)
		}
		if sub := secrets.hashOf(got, []string{"p"}, true); sub != hash.Subset(want, wantKeys, []string{"p"}) {
			t.Fatalf("pass %d: subset hash of the cached Secret %q", pass, sub)
		}
	}
}

// TestSpoofedMarkerKeepsNoDataInCache: an object that arrives carrying the annotation earlier
// releases used as the cache marker is still reduced to its hash; its data is not kept.
func TestSpoofedMarkerKeepsNoDataInCache(t *testing.T) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: map[string]string{"reloader.dev/cached-content-hash": "0000"}},
		Data:       map[string]string{"k": strings.Repeat("x", 1<<20)},
	}
	want := hash.ConfigMap(cm)
	out, err := ConfigMaps.Transform(cm)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.ConfigMap)
	if len(got.Data["k"]) > 64 {
		t.Fatalf("%d bytes of data kept in the cache", len(got.Data["k"]))
	}
	if h := ConfigMaps.contentHash(got); h != want {
		t.Errorf("cached hash %q, want the content's %q", h, want)
	}
}

// TestCacheMarkerIsNoValidAnnotationKey: the marker that tells a transformed object must be
// one the API server refuses, or a user could set it (see TestSpoofedCacheMarker).
func TestCacheMarkerIsNoValidAnnotationKey(t *testing.T) {
	for _, key := range []string{cachedHashAnnotation, cachedUIDHashAnnotation} {
		if errs := apivalidation.ValidateAnnotations(map[string]string{key: "x"}, field.NewPath("annotations")); len(errs) == 0 {
			t.Errorf("%s is a valid annotation key: a user could spoof the cache marker", key)
		}
	}
}

// TestCachedConfigMapHoldsKeysAndDigestsOnly: a 1 MiB ConfigMap takes, once transformed, its
// key names and one fixed-size digest per key; its values are not retained.
func TestCachedConfigMapHoldsKeysAndDigestsOnly(t *testing.T) {
	const keys = 16
	big := func() *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big"}, Data: map[string]string{}}
		for i := range keys {
			cm.Data[fmt.Sprintf("key-%02d", i)] = strings.Repeat(string(rune('a'+i)), 1<<20/keys)
		}
		return cm
	}
	transformed := func() any {
		out, err := ConfigMaps.Transform(big())
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	got := transformed().(*corev1.ConfigMap)
	stored := 0
	for k, d := range got.Data {
		stored += len(k) + len(d)
	}
	if len(got.Data) != keys || stored != keys*(6+32) {
		t.Errorf("cache holds %d keys, %d bytes of keys and digests", len(got.Data), stored)
	}
	full, cached := testutil.RetainedBy(func() any { return big() }), testutil.RetainedBy(transformed)
	t.Logf("1 MiB ConfigMap of %d keys: %d bytes held in full, %d once transformed", keys, full, cached)
	if full < 1<<20 {
		t.Skipf("the heap measure is unreliable here: a full ConfigMap holds %d bytes", full)
	}
	if cached > 16<<10 {
		t.Errorf("a transformed 1 MiB ConfigMap holds %d bytes", cached)
	}
}

// TestCachedSourceKeepsNoLastAppliedCopy: kubectl apply stores the whole object again in an
// annotation, a Secret's values in the clear; the cache must hold neither copy.
func TestCachedSourceKeepsNoLastAppliedCopy(t *testing.T) {
	key, err := hash.NewKey(make([]byte, hash.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	value := strings.Repeat("s", 64<<10)
	applied := fmt.Sprintf(`{"apiVersion":"v1","kind":"Secret","stringData":{"password":%q}}`, value)
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "s", Annotations: map[string]string{
			workload.LastAppliedAnnotation: applied, "team": "payments"}}
	}
	for name, tc := range map[string]struct {
		st  SourceType
		obj client.Object
	}{
		"Secret":    {Secrets(key), &corev1.Secret{ObjectMeta: meta(), Data: map[string][]byte{"password": []byte(value)}}},
		"ConfigMap": {ConfigMaps, &corev1.ConfigMap{ObjectMeta: meta(), Data: map[string]string{"password": value}}},
	} {
		t.Run(name, func(t *testing.T) {
			want := tc.st.Hash(tc.obj)
			out, err := tc.st.Transform(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			got := out.(client.Object).GetAnnotations()
			if _, kept := got[workload.LastAppliedAnnotation]; kept {
				t.Errorf("the cache keeps kubectl's last-applied copy (%d bytes)", len(got[workload.LastAppliedAnnotation]))
			}
			if got["team"] != "payments" {
				t.Errorf("the user's annotations are lost: %v", got)
			}
			if h := tc.st.contentHash(out.(client.Object)); h != want {
				t.Errorf("cached hash %q, want %q: the annotation must not count in the content", h, want)
			}
		})
	}
}
