package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", UID: "u1"}, Data: map[string][]byte{"p": []byte("x")}}
	want = hash.Secret(s)
	for pass := 1; pass <= 2; pass++ {
		out, _ := Secrets.Transform(s)
		if got := out.(*corev1.Secret); got.Data != nil || Secrets.contentHash(got) != want {
			t.Fatalf("pass %d: secret data kept or hash wrong", pass)
		}
	}
}
