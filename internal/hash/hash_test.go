package hash

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
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
	s := func(uid string, data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{UID: k8stypes.UID("u-" + uid)}, Data: data}
	}
	a := Secret(s("1", map[string][]byte{"password": []byte("hunter2")}))
	if got := Secret(s("1", map[string][]byte{"password": []byte("hunter2")})); got != a {
		t.Errorf("same secret hashed differently: %s vs %s", got, a)
	}
	if got := Secret(s("1", map[string][]byte{"password": []byte("hunter3")})); got == a {
		t.Error("changed data kept its hash")
	}
	if got := Secret(s("2", map[string][]byte{"password": []byte("hunter2")})); got == a {
		t.Error("hash does not depend on the key (UID): it is a plain hash of the data")
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
