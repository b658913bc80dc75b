package hash

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/reloader-operator/reloader/internal/testutil"
)

func TestConfigMap(t *testing.T) {
	base := &corev1.ConfigMap{Data: map[string]string{"a": "1", "b": "2"}}
	tests := []struct {
		name string
		cm   *corev1.ConfigMap
		same bool
	}{
		{"identical data", &corev1.ConfigMap{Data: map[string]string{"b": "2", "a": "1"}}, true},
		{"metadata only differs", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"x": "y"}, Annotations: map[string]string{"n": "m"}}, Data: map[string]string{"a": "1", "b": "2"}}, true},
		{"value changed", &corev1.ConfigMap{Data: map[string]string{"a": "1", "b": "3"}}, false},
		{"key renamed", &corev1.ConfigMap{Data: map[string]string{"a": "1", "c": "2"}}, false},
		{"key added", &corev1.ConfigMap{Data: map[string]string{"a": "1", "b": "2", "c": ""}}, false},
		{"moved to binaryData", &corev1.ConfigMap{Data: map[string]string{"a": "1"}, BinaryData: map[string][]byte{"b": []byte("2")}}, false},
		// "a=1;b=2" joined naively would collide with this one.
		{"separator inside value", &corev1.ConfigMap{Data: map[string]string{"a": "1;b=2"}}, false},
	}
	want := ConfigMap(base)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ConfigMap(tt.cm)
			if (got == want) != tt.same {
				t.Errorf("ConfigMap() equal to base = %v, want %v", got == want, tt.same)
			}
		})
	}
	if ConfigMap(&corev1.ConfigMap{}) == ConfigMap(&corev1.ConfigMap{Data: map[string]string{"": ""}}) {
		t.Error("empty ConfigMap hashes like one with an empty key")
	}
}

func TestSecret(t *testing.T) {
	key := func(b byte) Key {
		k, err := NewKey(bytes.Repeat([]byte{b}, KeySize))
		testutil.Must(t, err)
		return k
	}
	s := func(ns, name, uid, password string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: k8stypes.UID(uid)},
			Data: map[string][]byte{"password": []byte(password)}}
	}
	k1, k2 := key(1), key(2)
	a := Secret(k1, s("ns", "db", "u1", "hunter2"))
	tests := []struct {
		name string
		got  string
		same bool
	}{
		{"same data, re-created (new UID)", Secret(k1, s("ns", "db", "u2", "hunter2")), true},
		{"data changed", Secret(k1, s("ns", "db", "u1", "hunter3")), false},
		{"other key", Secret(k2, s("ns", "db", "u1", "hunter2")), false},
		{"other name, same data", Secret(k1, s("ns", "db2", "u1", "hunter2")), false},
		{"other namespace, same data", Secret(k1, s("ns2", "db", "u1", "hunter2")), false},
	}
	for _, tt := range tests {
		if (tt.got == a) != tt.same {
			t.Errorf("%s: equal to base = %v, want %v", tt.name, tt.got == a, tt.same)
		}
	}
	if id, keyed := KeyID(a); !keyed || id != k1.ID() {
		t.Errorf("KeyID(%q) = %q, %v; want %q, true", a, id, keyed, k1.ID())
	}
	if id, _ := KeyID(Secret(k2, s("ns", "db", "u1", "x"))); id == k1.ID() {
		t.Error("two keys share an ID")
	}
	old := UIDKeyedSecret(s("ns", "db", "u1", "hunter2"))
	if _, keyed := KeyID(old); keyed {
		t.Errorf("UID-keyed hash %q reads as keyed", old)
	}
	if old == UIDKeyedSecret(s("ns", "db", "u2", "hunter2")) {
		t.Error("UID-keyed hash does not depend on the UID")
	}
}

func TestKeyNeverPrintsItsBytes(t *testing.T) {
	secret := bytes.Repeat([]byte{0xab}, KeySize)
	k, err := NewKey(secret)
	testutil.Must(t, err)
	for _, format := range []string{"%v", "%+v", "%#v", "%s", "%x"} {
		if out := fmt.Sprintf(format, k); strings.Contains(out, "abab") || strings.Contains(out, string(secret)) {
			t.Errorf("%s prints the key's bytes: %s", format, out)
		}
	}
	if _, err := NewKey(secret[:16]); err == nil {
		t.Error("a 16-byte key was accepted")
	}
}

func TestVersions(t *testing.T) {
	one := Versions([]string{"secret/a=1", "secret/b=7"})
	if got := Versions([]string{"secret/b=7", "secret/a=1", "secret/a=1"}); got != one {
		t.Errorf("Versions is not a set: %q vs %q", got, one)
	}
	rotating := Versions([]string{"secret/a=1", "secret/a=2", "secret/b=7"})
	tests := []struct {
		applied, current string
		want             bool
	}{
		{one, one, true},
		{one, rotating, false},
		{rotating, one, true},
		{rotating, Versions([]string{"secret/a=2", "secret/b=7"}), true},
		{one, "", true},
	}
	for i, tt := range tests {
		if got := VersionsCovered(tt.applied, tt.current); got != tt.want {
			t.Errorf("%d: VersionsCovered(%q, %q) = %v, want %v", i, tt.applied, tt.current, got, tt.want)
		}
	}
}
