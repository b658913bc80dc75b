package hash

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
)

func TestSubsetOfConfigMap(t *testing.T) {
	cm := func(data map[string]string) map[string]string {
		return ConfigMapKeys(&corev1.ConfigMap{Data: data})
	}
	base := map[string]string{"a": "1", "b": "2"}
	ab := Subset("", cm(base), []string{"a"})
	tests := []struct {
		name string
		got  string
		same bool
	}{
		{"other key changed", Subset("", cm(map[string]string{"a": "1", "b": "3"}), []string{"a"}), true},
		{"other key removed", Subset("", cm(map[string]string{"a": "1"}), []string{"a"}), true},
		{"listed key changed", Subset("", cm(map[string]string{"a": "9", "b": "2"}), []string{"a"}), false},
		{"listed key emptied", Subset("", cm(map[string]string{"a": "", "b": "2"}), []string{"a"}), false},
		{"keys repeated and unordered", Subset("", cm(base), []string{"a", "a"}), true},
		{"other key set", Subset("", cm(base), []string{"a", "b"}), false},
	}
	for _, tt := range tests {
		if (tt.got == ab) != tt.same {
			t.Errorf("%s: equal to base = %v, want %v", tt.name, tt.got == ab, tt.same)
		}
	}

	missing := Subset("", cm(map[string]string{"b": "2"}), []string{"a"})
	empty := Subset("", cm(map[string]string{"a": "", "b": "2"}), []string{"a"})
	if missing == empty {
		t.Error("a missing key hashes like an empty one")
	}
	if KeySet(missing) != KeySet(empty) || KeySet(missing) == "" {
		t.Errorf("same key set, fingerprints %q and %q", KeySet(missing), KeySet(empty))
	}
	if KeySet(ab) == KeySet(Subset("", cm(base), []string{"a", "b"})) {
		t.Error("two key sets share a fingerprint")
	}
	if got := KeySet(Subset("", cm(base), []string{"b", "a"})); got != KeySet(Subset("", cm(base), []string{"a", "b"})) {
		t.Error("the fingerprint depends on the order of the keys")
	}
	binary := ConfigMapKeys(&corev1.ConfigMap{BinaryData: map[string][]byte{"a": []byte("1")}})
	if Subset("", binary, []string{"a"}) == ab {
		t.Error("a value moved to binaryData hashes as before")
	}
	for _, whole := range []string{ConfigMap(&corev1.ConfigMap{Data: base}), Versions([]string{"x=1"}), ""} {
		if KeySet(whole) != "" {
			t.Errorf("whole hash %q reads as a subset", whole)
		}
	}
}

func TestSubsetOfSecret(t *testing.T) {
	k1, _ := NewKey(bytes.Repeat([]byte{1}, KeySize))
	k2, _ := NewKey(bytes.Repeat([]byte{2}, KeySize))
	s := func(name, uid, user, password string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: k8stypes.UID("u-" + uid)},
			Data: map[string][]byte{"user": []byte(user), "password": []byte(password)}}
	}
	sub := func(k Key, sec *corev1.Secret, keys ...string) string {
		return Subset(Secret(k, sec), SecretKeys(k, sec), keys)
	}
	base := sub(k1, s("db", "1", "app", "hunter2"), "password")
	if id, keyed := KeyID(base); !keyed || id != k1.ID() {
		t.Errorf("KeyID(%q) = %q, %v; want %q", base, id, keyed, k1.ID())
	}
	if KeySet(base) == "" {
		t.Errorf("subset hash %q carries no key set", base)
	}
	tests := []struct {
		name string
		got  string
		same bool
	}{
		{"other key changed", sub(k1, s("db", "1", "root", "hunter2"), "password"), true},
		{"re-created", sub(k1, s("db", "2", "app", "hunter2"), "password"), true},
		{"listed key changed", sub(k1, s("db", "1", "app", "hunter3"), "password"), false},
		{"other name, same value", sub(k1, s("db2", "1", "app", "hunter2"), "password"), false},
		{"other install key", sub(k2, s("db", "1", "app", "hunter2"), "password"), false},
	}
	for _, tt := range tests {
		if (tt.got == base) != tt.same {
			t.Errorf("%s: equal to base = %v, want %v", tt.name, tt.got == base, tt.same)
		}
	}
	// Without a key, digests are keyed by the UID and the hash has no key ID.
	keyless := sub(Key{}, s("db", "1", "app", "hunter2"), "password")
	if _, keyed := KeyID(keyless); keyed || KeySet(keyless) != KeySet(base) {
		t.Errorf("keyless subset hash %q: keyed %v, key set %q", keyless, keyed, KeySet(keyless))
	}
	plain := ConfigMapKeys(&corev1.ConfigMap{Data: map[string]string{"password": "hunter2"}})["password"]
	for _, d := range SecretKeys(k1, s("db", "1", "app", "hunter2")) {
		if string(d) == plain || strings.Contains(string(d), "hunter2") {
			t.Errorf("a Secret's key digest %q is unkeyed", d)
		}
	}
}

// A cached ConfigMap keeps one fixed-size digest per key, whatever the size of the value.
func TestKeyDigestsAreShort(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	for k, d := range ConfigMapKeys(&corev1.ConfigMap{Data: map[string]string{"big": big, "small": ""}}) {
		if len(d) != 2*digestBytes {
			t.Errorf("digest of %s is %d bytes", k, len(d))
		}
	}
}
