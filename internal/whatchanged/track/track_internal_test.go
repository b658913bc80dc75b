package track

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// TestChangesNameTheKeysOfTheLatestChange: the table notes a change from the cached objects
// before and after it, and names its keys only while the content is the one it made.
func TestChangesNameTheKeysOfTheLatestChange(t *testing.T) {
	transform := func(cm *corev1.ConfigMap) *corev1.ConfigMap {
		out, err := sourcecache.ConfigMaps.Transform(cm)
		testutil.Must(t, err)
		return out.(*corev1.ConfigMap)
	}
	old := transform(testutil.ManagedConfigMap("c", 16, "v1"))
	cur := testutil.ManagedConfigMap("c", 16, "v1")
	cur.Data["key-03"] = "v2"
	delete(cur.Data, "key-07")
	cur.Data["new"] = "x"
	cur = transform(cur)
	c := New(0)
	id := source.ID{Kind: source.ConfigMap, Name: "c"}
	if _, ok := c.Keys(sourcecache.ConfigMaps, "ns", id, cur, nil, ""); ok {
		t.Fatal("keys named before any change was seen")
	}
	p := c.Observe(sourcecache.ConfigMaps)
	p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: cur})
	k, ok := c.Keys(sourcecache.ConfigMaps, "ns", id, cur, nil, "")
	if got := k.String(); !ok || got != "keys changed: key-03; added: new; removed: key-07" {
		t.Errorf("keys %q, %v", got, ok)
	}
	if k, _ := c.Keys(sourcecache.ConfigMaps, "ns", id, cur, []string{"key-07"}, ""); k.String() != "keys removed: key-07" {
		t.Errorf("restricted to key-07: %q", k.String())
	}
	if _, ok := c.Keys(sourcecache.ConfigMaps, "ns", id, old, nil, ""); ok {
		t.Error("keys named for content the change did not make")
	}
	retained := testutil.RetainedBy(func() any {
		c := New(0)
		p := c.Observe(sourcecache.ConfigMaps)
		for i := range 1000 {
			o, n := old.DeepCopy(), cur.DeepCopy()
			o.Name, n.Name = fmt.Sprintf("c-%04d", i), fmt.Sprintf("c-%04d", i)
			o.SelfLink = strings.Clone(o.SelfLink)
			p.Update(event.UpdateEvent{ObjectOld: o, ObjectNew: n})
		}
		return c
	})
	t.Logf("the latest change of a 16-key ConfigMap: %d bytes per source in the table", retained/1000)
	small := New(2)
	sp := small.Observe(sourcecache.ConfigMaps)
	for i := range 3 {
		o, n := old.DeepCopy(), cur.DeepCopy()
		o.Name, n.Name = fmt.Sprintf("c-%d", i), fmt.Sprintf("c-%d", i)
		sp.Update(event.UpdateEvent{ObjectOld: o, ObjectNew: n})
	}
	for i, want := range []bool{false, true, true} {
		n := cur.DeepCopy()
		n.Name = fmt.Sprintf("c-%d", i)
		if _, ok := small.Keys(sourcecache.ConfigMaps, "ns", source.ID{Kind: source.ConfigMap, Name: n.Name}, n, nil, ""); ok != want {
			t.Errorf("a full table of 2 after 3 changes: c-%d kept %v, want %v (the oldest goes)", i, ok, want)
		}
	}
	p.Delete(event.DeleteEvent{Object: cur})
	if _, ok := c.Keys(sourcecache.ConfigMaps, "ns", id, cur, nil, ""); ok {
		t.Error("a deleted source's change is still kept")
	}
}

// TestChangesNameTheKeysSinceWhatTheWorkloadApplied: three writes (a, then b, then c
// changed); a workload that applied the first state is told of a, b and c, one that applied
// the second of b and c, one whose state is not kept of the latest write. A workload that
// reads key a only matches its recorded subset hash.
func TestChangesNameTheKeysSinceWhatTheWorkloadApplied(t *testing.T) {
	states := []map[string]string{{"a": "1", "b": "1", "c": "1"}}
	for _, k := range []string{"a", "b", "c"} {
		next := maps.Clone(states[len(states)-1])
		next[k] = "2"
		states = append(states, next)
	}
	objs := make([]*corev1.ConfigMap, len(states))
	for i, d := range states {
		out, err := sourcecache.ConfigMaps.Transform(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}, Data: d})
		testutil.Must(t, err)
		objs[i] = out.(*corev1.ConfigMap)
	}
	c := New(0)
	p := c.Observe(sourcecache.ConfigMaps)
	for i := 1; i < len(objs); i++ {
		p.Update(event.UpdateEvent{ObjectOld: objs[i-1], ObjectNew: objs[i]})
		p.Update(event.UpdateEvent{ObjectOld: objs[i-1], ObjectNew: objs[i]}) // a second controller's watch
	}
	id, now := source.ID{Kind: source.ConfigMap, Name: "c"}, objs[3]
	for _, tc := range []struct {
		applied string
		only    []string
		want    string
	}{
		{sourcecache.ConfigMaps.ContentHash(objs[0]), nil, "keys changed: a, b, c"},
		{sourcecache.ConfigMaps.ContentHash(objs[1]), nil, "keys changed: b, c"},
		{"not kept", nil, "keys changed: c"},
		{sourcecache.ConfigMaps.HashOf(objs[0], []string{"a"}, true), []string{"a"}, "keys changed: a"},
		// a=2 applied already: nothing of a changed since.
		{sourcecache.ConfigMaps.HashOf(objs[1], []string{"a"}, true), []string{"a"}, ""},
	} {
		k, ok := c.Keys(sourcecache.ConfigMaps, "ns", id, now, tc.only, tc.applied)
		if !ok || k.String() != tc.want {
			t.Errorf("applied %.12s, only %v: %q (%v), want %q", tc.applied, tc.only, k.String(), ok, tc.want)
		}
	}
}

// TestAFutureDatedEntryNamesNoWriter: a managedFields entry written by hand, dated 2999, does
// not make its manager the writer of a later change: the change is reported as written by the
// manager whose entry it changed, in the Changes table and in the flap breaker's feed.
func TestAFutureDatedEntryNamesNoWriter(t *testing.T) {
	transform := func(cm *corev1.ConfigMap) *corev1.ConfigMap {
		out, err := sourcecache.ConfigMaps.Transform(cm)
		testutil.Must(t, err)
		return out.(*corev1.ConfigMap)
	}
	forged := metav1.NewTime(time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC))
	old := testutil.ManagedConfigMap("c", 2, "v1")
	old.ManagedFields = append(old.ManagedFields, metav1.ManagedFieldsEntry{Manager: "security-bot", Operation: "Update", Time: &forged})
	cur := old.DeepCopy()
	cur.Data["key-00"] = "v2"
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	cur.ManagedFields = append(cur.ManagedFields, metav1.ManagedFieldsEntry{Manager: "real-writer", Operation: "Update", Time: &now,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{"f:key-00":{}}}`)}})
	o, c := transform(old), transform(cur)
	if w, _ := sourcecache.ConfigMaps.Writer(c); w.Manager != "real-writer" {
		t.Errorf("newest writer %s", w)
	}
	w, ok := sourcecache.ChangeWriter(o, c)
	if !ok || w.String() != "field manager real-writer (Update at "+now.UTC().Format(time.RFC3339)+", reported by the API server)" {
		t.Errorf("writer of the change %q, %v", w, ok)
	}
	ch := New(0)
	ch.Observe(sourcecache.ConfigMaps).Update(event.UpdateEvent{ObjectOld: o, ObjectNew: c})
	if w, ok := ch.Writer(sourcecache.ConfigMaps, "ns", source.ID{Kind: source.ConfigMap, Name: "c"}, c); !ok || w.Manager != "real-writer" {
		t.Errorf("the table's writer %q, %v", w, ok)
	}
}

// TestChangesFloodOfOneNamespaceKeepsAnothers: a namespace that changes 5,000 ConfigMaps
// drops its own oldest changes, not another namespace's: B's change still names its keys.
func TestChangesFloodOfOneNamespaceKeepsAnothers(t *testing.T) {
	transform := func(cm *corev1.ConfigMap) *corev1.ConfigMap {
		out, err := sourcecache.ConfigMaps.Transform(cm)
		testutil.Must(t, err)
		return out.(*corev1.ConfigMap)
	}
	changed := func(ns, name string) (old, cur *corev1.ConfigMap) {
		o, n := testutil.ManagedConfigMap(name, 2, "v1"), testutil.ManagedConfigMap(name, 2, "v1")
		n.Data["key-01"] = "v2"
		o.Namespace, n.Namespace = ns, ns
		return transform(o), transform(n)
	}
	c := New(0)
	p := c.Observe(sourcecache.ConfigMaps)
	bOld, bCur := changed("tenant-b", "app")
	p.Update(event.UpdateEvent{ObjectOld: bOld, ObjectNew: bCur})
	for i := range 5000 {
		o, n := changed("tenant-a", fmt.Sprint("cm-", i))
		p.Update(event.UpdateEvent{ObjectOld: o, ObjectNew: n})
	}
	if n, max := c.shares.Of("tenant-a"), defaultMaxChanges/changesShare; n > max {
		t.Errorf("tenant-a holds %d changes, want at most its share %d", n, max)
	}
	if len(c.entries) != c.shares.Len() {
		t.Errorf("table holds %d changes, %d counted", len(c.entries), c.shares.Len())
	}
	k, ok := c.Keys(sourcecache.ConfigMaps, "tenant-b", source.ID{Kind: source.ConfigMap, Name: "app"}, bCur, nil, "")
	if !ok || k.String() != "keys changed: key-01" {
		t.Errorf("tenant-b's change after tenant-a's flood: %q, %v; want its keys named", k.String(), ok)
	}
	// A's latest change is kept, its oldest dropped.
	_, aCur := changed("tenant-a", "cm-4999")
	if _, ok := c.Keys(sourcecache.ConfigMaps, "tenant-a", source.ID{Kind: source.ConfigMap, Name: "cm-4999"}, aCur, nil, ""); !ok {
		t.Error("tenant-a's latest change was dropped")
	}
	_, aFirst := changed("tenant-a", "cm-0")
	if _, ok := c.Keys(sourcecache.ConfigMaps, "tenant-a", source.ID{Kind: source.ConfigMap, Name: "cm-0"}, aFirst, nil, ""); ok {
		t.Error("tenant-a's oldest change is still kept past its share")
	}
}
