package hash

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// manyKeys is a map of n keys named after prefix (padded to nameLen when longer), each valued v.
func manyKeys(n, nameLen int, v string) map[string]string {
	out := make(map[string]string, n)
	for i := range n {
		k := fmt.Sprintf("k%d", i)
		if len(k) < nameLen {
			k += strings.Repeat("x", nameLen-len(k))
		}
		out[k] = v
	}
	return out
}

// TestKeyCap: per-key digests stop past MaxKeyDigests keys or MaxKeyDigestBytes of names and
// digests, whichever comes first; within both, every key is digested as before.
func TestKeyCap(t *testing.T) {
	k, err := NewKey(make([]byte, KeySize))
	if err != nil {
		t.Fatal(err)
	}
	// Names of 60 bytes cost 94 each with their digest: 697 of them fit in 64 KiB.
	fitting := (MaxKeyDigestBytes / (60 + DigestCost))
	for _, tc := range []struct {
		name string
		data map[string]string
		over bool
	}{
		{"no keys", map[string]string{}, false},
		{"at the key cap", manyKeys(MaxKeyDigests, 0, "v"), false},
		{"one key past it", manyKeys(MaxKeyDigests+1, 0, "v"), true},
		{"150,000 short keys", manyKeys(150000, 0, "v"), true},
		{"long names at the byte cap", manyKeys(fitting, 60, "v"), false},
		{"long names past it", manyKeys(fitting+1, 60, "v"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cm := &corev1.ConfigMap{Data: tc.data}
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}, Data: map[string][]byte{}}
			for key, v := range tc.data {
				s.Data[key] = []byte(v)
			}
			for kind, got := range map[string]map[string]string{"ConfigMap": ConfigMapKeys(cm), "Secret": SecretKeys(k, s)} {
				switch {
				case tc.over && got != nil:
					t.Errorf("%s over the cap: %d digests, want none (nil)", kind, len(got))
				case !tc.over && (got == nil || len(got) != len(tc.data)):
					t.Errorf("%s within the cap: %d digests (nil: %v), want %d", kind, len(got), got == nil, len(tc.data))
				}
			}
			if ConfigMapOverCap(cm) != tc.over || SecretOverCap(s) != tc.over {
				t.Errorf("over the cap: ConfigMap %v, Secret %v, want %v", ConfigMapOverCap(cm), SecretOverCap(s), tc.over)
			}
		})
	}
	// binaryData counts with data.
	split := &corev1.ConfigMap{Data: manyKeys(MaxKeyDigests, 0, "v"), BinaryData: map[string][]byte{"bin": {1}}}
	if ConfigMapKeys(split) != nil {
		t.Error("data and binaryData past the cap together are digested")
	}
}

// TestSubsetOfWholeOverCap: the hash of some keys of a source over the cap changes with any
// change of its content (a key read or not), keeps the key set's fingerprint of Subset (a
// source that crosses the cap compares as a change of content, not of key set), and differs
// from Subset's hash of the same keys.
func TestSubsetOfWholeOverCap(t *testing.T) {
	data := manyKeys(MaxKeyDigests+1, 0, "v")
	of := func(d map[string]string) string {
		cm := &corev1.ConfigMap{Data: d}
		if ConfigMapKeys(cm) != nil {
			t.Fatal("the source is within the cap")
		}
		return SubsetOfWhole(ConfigMap(cm), []string{"k1"})
	}
	base := of(data)
	if of(maps.Clone(data)) != base {
		t.Error("the same content hashes differently")
	}
	other := maps.Clone(data)
	other["k999"] = "changed"
	read := maps.Clone(data)
	read["k1"] = "changed"
	added := maps.Clone(data)
	added["new"] = "v"
	for name, d := range map[string]map[string]string{"a key not read": other, "the key read": read, "a key added": added} {
		if of(d) == base {
			t.Errorf("a change of %s leaves the hash as it was", name)
		}
	}
	small := map[string]string{"k1": "v", "k2": "v"}
	within := Subset(ConfigMap(&corev1.ConfigMap{Data: small}), ConfigMapKeys(&corev1.ConfigMap{Data: small}), []string{"k1"})
	if KeySet(base) == "" || KeySet(base) != KeySet(within) {
		t.Errorf("key sets %q (over the cap) and %q (within): want the same fingerprint", KeySet(base), KeySet(within))
	}
	if base == within {
		t.Error("a hash over the cap equals one within it")
	}
	if KeySet(SubsetOfWhole("", []string{"k1", "k2"})) == KeySet(base) {
		t.Error("two key sets share a fingerprint over the cap")
	}
	// A Secret's hash keeps its key ID, so that it is re-based like the whole hash.
	k, _ := NewKey(make([]byte, KeySize))
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}, Data: map[string][]byte{"a": []byte("1")}}
	whole := Secret(k, s)
	id, _ := KeyID(whole)
	if got, _ := KeyID(SubsetOfWhole(whole, []string{"a"})); got != id {
		t.Errorf("key ID %q, want %q", got, id)
	}
}
