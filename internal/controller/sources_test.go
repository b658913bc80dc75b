package controller

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/reloader-operator/reloader/internal/hash"
)

func TestTransformKeepsOnlyTheHashAndIsIdempotent(t *testing.T) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "c", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Data:       map[string]string{"k": "v"},
		BinaryData: map[string][]byte{"b": {1}},
	}
	want := hash.ConfigMap(cm)
	for pass := 1; pass <= 2; pass++ {
		out, err := ConfigMaps.Transform(cm)
		if err != nil {
			t.Fatal(err)
		}
		got := out.(*corev1.ConfigMap)
		if got.Data != nil || got.BinaryData != nil || got.ManagedFields != nil {
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
	want, wantUID := hash.Secret(key, s), hash.UIDKeyedSecret(s)
	for pass := 1; pass <= 2; pass++ {
		out, _ := secrets.Transform(s)
		got := out.(*corev1.Secret)
		if got.Data != nil || secrets.contentHash(got) != want || secrets.uidHash(got) != wantUID {
			t.Fatalf("pass %d: secret data kept or hash wrong", pass)
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
	if got.Data != nil {
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
