package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/source"
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
	if d := ConfigMaps.keyDigests(before); d != nil {
		t.Errorf("%d digests of a source over the cap", len(d))
	}
	// A full object reads the same as its cached copy (explain and plan read full objects).
	full := keyDense("dense", n)
	if keys, over := ConfigMaps.OverCap(full); !over || keys != n {
		t.Errorf("OverCap of the full object = %d, %v", keys, over)
	}
	read := []string{"k1"}
	if got, want := ConfigMaps.hashOf(full, read, true), ConfigMaps.hashOf(before, read, true); got != want {
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
		if ConfigMaps.hashOf(after, read, true) == ConfigMaps.hashOf(before, read, true) {
			t.Errorf("a change of %s leaves the hash of the keys read as it was", name)
		}
		if ConfigMaps.contentHash(after) == ConfigMaps.contentHash(before) {
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
	if d := ConfigMaps.keyDigests(s1); len(d) != 2 {
		t.Errorf("%d digests kept, want 2", len(d))
	}
	if ConfigMaps.hashOf(s1, []string{"a"}, true) != ConfigMaps.hashOf(s2, []string{"a"}, true) {
		t.Error("a change of a key not read changes the hash of the keys read, within the cap")
	}
	// Crossing the cap: the same key set, another content (Diff reloads rather than re-records).
	crossed := keyDense("small", hash.MaxKeyDigests+1)
	crossed.Data["a"], crossed.Data["b"] = "1", "1"
	over := ConfigMaps.hashOf(transformed(t, ConfigMaps, crossed), []string{"a"}, true)
	if within := ConfigMaps.hashOf(s1, []string{"a"}, true); hash.KeySet(over) != hash.KeySet(within) || over == within {
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
	if secrets.contentHash(got) != want || secrets.uidHash(got) != wantUID || secrets.keyDigests(got) != nil {
		t.Errorf("Secret over the cap cached as %q", got.GetSelfLink())
	}
	if _, over := secrets.OverCap(got); !over {
		t.Error("Secret not over the cap")
	}
}

// TestBaselinesAreBoundedInBytes: the recent changes and the notes keep old copies of
// sources up to a byte budget, not a count: past it, recent changes are not kept, and a note
// keeps the hashes only, which still tell the change (the whole content compared).
func TestBaselinesAreBoundedInBytes(t *testing.T) {
	// Sources of 60 KiB of digests each and 200 KiB of annotations, as a tenant may write.
	big := func(i int) client.Object {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("s%d", i),
			ResourceVersion: fmt.Sprint(i + 1), Annotations: map[string]string{"note": strings.Repeat("x", 200<<10)}},
			Data: map[string]string{}}
		for k := range 600 {
			cm.Data[fmt.Sprintf("key-%060d", k)] = fmt.Sprint(i)
		}
		return transformed(t, ConfigMaps, cm)
	}
	b := NewBaselines()
	now := time.Now()
	objs := make([]client.Object, 200)
	for i := range objs {
		objs[i] = big(i)
		if _, over := ConfigMaps.OverCap(objs[i]); over {
			t.Fatal("the test's source is over the cap: it would not test the budget of full digests")
		}
		b.changedRecently("ns", source.ID{Kind: source.ConfigMap, Name: objs[i].GetName()}, objs[i], fmt.Sprint(i+1000), now)
	}
	kept, bytes := 0, 0
	for _, changes := range b.recent {
		for _, c := range changes {
			kept++
			bytes += retainedSize(c.old)
		}
	}
	if bytes != b.recentBytes || bytes > recentMaxBytes || kept == 0 || kept == len(objs) {
		t.Errorf("recent changes keep %d objects of %d bytes (counted %d), want some, within %d", kept, bytes, b.recentBytes, recentMaxBytes)
	}

	// Another namespace's change still finds room: the fullest namespace's oldest make it.
	other := big(0)
	b.changedRecently("other", source.ID{Kind: source.ConfigMap, Name: "s"}, other, "9999", now)
	if len(b.recent[handledKey{"other", source.ID{Kind: source.ConfigMap, Name: "s"}}]) != 1 || b.recentBytes > recentMaxBytes {
		t.Errorf("a change of another namespace is not kept (%d bytes kept) once one namespace filled the budget", b.recentBytes)
	}

	// Notes: one workload per source, each noting its source's old copy.
	id := func(o client.Object) source.ID { return source.ID{Kind: source.ConfigMap, Name: o.GetName()} }
	for i, o := range objs {
		w := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: types.UID(fmt.Sprint("w", i)), ResourceVersion: "1"}}
		b.before(w, id(o), o, "5000")
	}
	if b.notedBytes > notedMaxBytes+len(objs)*(objectOverhead+512) {
		t.Errorf("notes keep %d bytes, want about %d at most", b.notedBytes, notedMaxBytes)
	}
	slimmed := 0
	for i, o := range objs {
		n := b.m[types.UID(fmt.Sprint("w", i))][id(o)]
		if n.old == o {
			continue
		}
		slimmed++
		if ConfigMaps.contentHash(n.old) != ConfigMaps.contentHash(o) {
			t.Errorf("a slim note hashes to %q, its source to %q", ConfigMaps.contentHash(n.old), ConfigMaps.contentHash(o))
		}
		keys := []string{fmt.Sprintf("key-%060d", 1)}
		if ConfigMaps.hashOf(n.old, keys, true) == ConfigMaps.hashOf(objs[(i+1)%len(objs)], keys, true) {
			t.Error("a slim note's hash of some keys equals another source's")
		}
	}
	if slimmed == 0 || slimmed == len(objs) {
		t.Errorf("%d of %d notes slimmed, want those past the budget only", slimmed, len(objs))
	}
	// Dropping the workloads gives the bytes back.
	for i := range objs {
		b.drop(types.UID(fmt.Sprint("w", i)))
	}
	if b.notedBytes != 0 || len(b.notedRefs) != 0 {
		t.Errorf("after every workload is dropped the notes keep %d bytes, %d objects", b.notedBytes, len(b.notedRefs))
	}
}
