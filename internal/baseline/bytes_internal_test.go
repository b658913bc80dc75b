package baseline

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
)

// keyDense is a ConfigMap of n short keys (about 9 bytes each in JSON, 1.35 MB at 150,000).
func keyDense(name string, n int) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: make(map[string]string, n)}
	for i := range n {
		cm.Data[fmt.Sprintf("k%d", i)] = "v"
	}
	return cm
}

func transformed(t *testing.T, st sourcecache.SourceType, o client.Object) client.Object {
	t.Helper()
	out, err := st.Transform(o)
	if err != nil {
		t.Fatal(err)
	}
	return out.(client.Object)
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
		return transformed(t, sourcecache.ConfigMaps, cm)
	}
	b := New()
	now := time.Now()
	objs := make([]client.Object, 200)
	for i := range objs {
		objs[i] = big(i)
		if _, over := sourcecache.ConfigMaps.OverCap(objs[i]); over {
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
		if sourcecache.ConfigMaps.ContentHash(n.old) != sourcecache.ConfigMaps.ContentHash(o) {
			t.Errorf("a slim note hashes to %q, its source to %q", sourcecache.ConfigMaps.ContentHash(n.old), sourcecache.ConfigMaps.ContentHash(o))
		}
		keys := []string{fmt.Sprintf("key-%060d", 1)}
		if sourcecache.ConfigMaps.HashOf(n.old, keys, true) == sourcecache.ConfigMaps.HashOf(objs[(i+1)%len(objs)], keys, true) {
			t.Error("a slim note's hash of some keys equals another source's")
		}
	}
	if slimmed == 0 || slimmed == len(objs) {
		t.Errorf("%d of %d notes slimmed, want those past the budget only", slimmed, len(objs))
	}
	// Dropping the workloads gives the bytes back.
	for i := range objs {
		b.Drop(types.UID(fmt.Sprint("w", i)))
	}
	if b.notedBytes != 0 || len(b.notedRefs) != 0 {
		t.Errorf("after every workload is dropped the notes keep %d bytes, %d objects", b.notedBytes, len(b.notedRefs))
	}
}
