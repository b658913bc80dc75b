package sourcecache

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/hash"
)

// keyDense is a ConfigMap of n short keys (about 9 bytes each in JSON, 1.35 MB at 150,000).
func keyDense(name string, n int) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: make(map[string]string, n)}
	for i := range n {
		cm.Data[fmt.Sprintf("k%d", i)] = "v"
	}
	return cm
}

func transformed(t *testing.T, st SourceType, o client.Object) client.Object {
	t.Helper()
	out, err := st.Transform(o)
	if err != nil {
		t.Fatal(err)
	}
	return out.(client.Object)
}

// TestOverCapSourceKeepsTheWholeHashOnly: a ConfigMap of 150,000 keys is cached as its
// hashes and its number of keys, with no digest; the hash a workload reading one key of it
// compares changes with any change of it, the key read or not. Within the cap, per-key
// digests are kept as before, and a change of another key leaves that hash alone.
func TestOverCapSourceKeepsTheWholeHashOnly(t *testing.T) {
	const n = 150000
	before := transformed(t, ConfigMaps, keyDense("dense", n))
	if len(before.GetSelfLink()) > 256 {
		t.Errorf("the cache keeps %d bytes of a source over the cap, want its hashes only", len(before.GetSelfLink()))
	}
	if keys, over := ConfigMaps.OverCap(before); !over || keys != n {
		t.Errorf("OverCap = %d, %v; want %d, true", keys, over, n)
	}
	if d := ConfigMaps.KeyDigestsOf(before); d != nil {
		t.Errorf("%d digests of a source over the cap", len(d))
	}
	// A full object reads the same as its cached copy (explain and plan read full objects).
	full := keyDense("dense", n)
	if keys, over := ConfigMaps.OverCap(full); !over || keys != n {
		t.Errorf("OverCap of the full object = %d, %v", keys, over)
	}
	read := []string{"k1"}
	if got, want := ConfigMaps.HashOf(full, read, true), ConfigMaps.HashOf(before, read, true); got != want {
		t.Errorf("the full object hashes to %q, its cached copy to %q", got, want)
	}
	for name, change := range map[string]func(*corev1.ConfigMap){
		"a key not read": func(c *corev1.ConfigMap) { c.Data["k99999"] = "w" },
		"the key read":   func(c *corev1.ConfigMap) { c.Data["k1"] = "w" },
		"a key removed":  func(c *corev1.ConfigMap) { delete(c.Data, "k5") },
	} {
		cm := keyDense("dense", n)
		change(cm)
		after := transformed(t, ConfigMaps, cm)
		if ConfigMaps.HashOf(after, read, true) == ConfigMaps.HashOf(before, read, true) {
			t.Errorf("a change of %s leaves the hash of the keys read as it was", name)
		}
		if ConfigMaps.ContentHash(after) == ConfigMaps.ContentHash(before) {
			t.Errorf("a change of %s leaves the whole hash as it was", name)
		}
	}

	// Within the cap: per-key, as before.
	small := func(b string) client.Object {
		return transformed(t, ConfigMaps, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "small"}, Data: map[string]string{"a": "1", "b": b}})
	}
	s1, s2 := small("1"), small("2")
	if _, over := ConfigMaps.OverCap(s1); over {
		t.Error("a source of two keys is over the cap")
	}
	if d := ConfigMaps.KeyDigestsOf(s1); len(d) != 2 {
		t.Errorf("%d digests kept, want 2", len(d))
	}
	if ConfigMaps.HashOf(s1, []string{"a"}, true) != ConfigMaps.HashOf(s2, []string{"a"}, true) {
		t.Error("a change of a key not read changes the hash of the keys read, within the cap")
	}
	// Crossing the cap: the same key set, another content (Diff reloads rather than re-records).
	crossed := keyDense("small", hash.MaxKeyDigests+1)
	crossed.Data["a"], crossed.Data["b"] = "1", "1"
	over := ConfigMaps.HashOf(transformed(t, ConfigMaps, crossed), []string{"a"}, true)
	if within := ConfigMaps.HashOf(s1, []string{"a"}, true); hash.KeySet(over) != hash.KeySet(within) || over == within {
		t.Errorf("crossing the cap: %q then %q, want the same key set and another hash", within, over)
	}

	// A Secret over the cap, alike, under the install key.
	key, err := hash.NewKey(make([]byte, hash.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	secrets := Secrets(key)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", UID: "u"}, Data: map[string][]byte{}}
	for k := range keyDense("", hash.MaxKeyDigests+1).Data {
		s.Data[k] = []byte("v")
	}
	want, wantUID := hash.Secret(key, s), hash.UIDKeyedSecret(s)
	got := transformed(t, secrets, s)
	if secrets.ContentHash(got) != want || secrets.uidHash(got) != wantUID || secrets.KeyDigestsOf(got) != nil {
		t.Errorf("Secret over the cap cached as %q", got.GetSelfLink())
	}
	if _, over := secrets.OverCap(got); !over {
		t.Error("Secret not over the cap")
	}
}
