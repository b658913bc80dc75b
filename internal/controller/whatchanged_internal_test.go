package controller

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/whatchanged"
)

// managedConfigMap is a ConfigMap of keys keys as the API server sends it: with the
// managedFields of three writers, each owning every key.
func managedConfigMap(name string, keys int, value string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: map[string]string{}}
	var fields strings.Builder
	fields.WriteString(`{"f:data":{`)
	for i := range keys {
		k := fmt.Sprintf("key-%02d", i)
		cm.Data[k] = value
		if i > 0 {
			fields.WriteByte(',')
		}
		fmt.Fprintf(&fields, `"f:%s":{}`, k)
	}
	fields.WriteString(`}}`)
	at := metav1.NewTime(time.Date(2026, 11, 26, 21, 0, 0, 0, time.UTC))
	for i, m := range []string{"kubectl-client-side-apply", "helm", "kubectl-edit"} {
		t := metav1.NewTime(at.Add(time.Duration(i) * time.Minute))
		cm.ManagedFields = append(cm.ManagedFields, metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: "v1", Time: &t, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields.String())}})
	}
	return cm
}

// TestCacheKeepsOnlyTheNewestWriters: of managedFields, the cache keeps the newest writers
// (whatchanged.MaxKept) in the packed string, about 40 bytes each, and the per-object cost
// grows by that.
func TestCacheKeepsOnlyTheNewestWriters(t *testing.T) {
	transform := func(cm *corev1.ConfigMap) *corev1.ConfigMap {
		out, err := ConfigMaps.Transform(cm)
		testutil.Must(t, err)
		return out.(*corev1.ConfigMap)
	}
	got := transform(managedConfigMap("c", 8, "v"))
	if got.ManagedFields != nil {
		t.Fatalf("the cache keeps %d managedFields entries", len(got.ManagedFields))
	}
	w, ok := ConfigMaps.writer(got)
	if !ok || w.Short() != "kubectl-edit (Update at 2026-11-26T21:02:00Z)" {
		t.Errorf("cached writer %+v, %v", w, ok)
	}
	// Many objects, for a figure per object above the heap's noise.
	const n = 2000
	measure := func(withFields bool) uint64 {
		return testutil.RetainedBy(func() any {
			out := make([]*corev1.ConfigMap, n)
			for i := range out {
				cm := managedConfigMap(fmt.Sprintf("c-%04d", i), 8, "v")
				if !withFields {
					cm.ManagedFields = nil
				}
				out[i] = transform(cm)
			}
			return out
		})
	}
	bare := managedConfigMap("c", 8, "v")
	bare.ManagedFields = nil
	kept := whatchanged.Pack(entries(got))
	if grown := len(got.SelfLink) - len(transform(bare).SelfLink); grown != len(kept) || strings.Count(kept, ",") != 2 {
		t.Errorf("the packed string grew by %d bytes, want the entries' %d (%q)", grown, len(kept), kept)
	}
	without, with := measure(false)/n, measure(true)/n
	t.Logf("a cached ConfigMap of 8 keys: %d bytes without a writer, %d with the newest writers kept (packed string %d bytes, entries %d)",
		without, with, len(got.SelfLink), len(kept))
	// Three entries of about 40 bytes; the heap measure is noisy by a few dozen bytes per object.
	if with > without+256 {
		t.Errorf("keeping the writer costs %d bytes per source", with-without)
	}
}

// TestChangesNameTheKeysOfTheLatestChange: the table notes a change from the cached objects
// before and after it, and names its keys only while the content is the one it made.
func TestChangesNameTheKeysOfTheLatestChange(t *testing.T) {
	transform := func(cm *corev1.ConfigMap) *corev1.ConfigMap {
		out, err := ConfigMaps.Transform(cm)
		testutil.Must(t, err)
		return out.(*corev1.ConfigMap)
	}
	old := transform(managedConfigMap("c", 16, "v1"))
	cur := managedConfigMap("c", 16, "v1")
	cur.Data["key-03"] = "v2"
	delete(cur.Data, "key-07")
	cur.Data["new"] = "x"
	cur = transform(cur)
	c := NewChanges(0)
	id := source.ID{Kind: source.ConfigMap, Name: "c"}
	if _, ok := c.keys(ConfigMaps, "ns", id, cur, nil, ""); ok {
		t.Fatal("keys named before any change was seen")
	}
	p := c.Observe(ConfigMaps)
	p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: cur})
	k, ok := c.keys(ConfigMaps, "ns", id, cur, nil, "")
	if got := k.String(); !ok || got != "keys changed: key-03; added: new; removed: key-07" {
		t.Errorf("keys %q, %v", got, ok)
	}
	if k, _ := c.keys(ConfigMaps, "ns", id, cur, []string{"key-07"}, ""); k.String() != "keys removed: key-07" {
		t.Errorf("restricted to key-07: %q", k.String())
	}
	if _, ok := c.keys(ConfigMaps, "ns", id, old, nil, ""); ok {
		t.Error("keys named for content the change did not make")
	}
	retained := testutil.RetainedBy(func() any {
		c := NewChanges(0)
		p := c.Observe(ConfigMaps)
		for i := range 1000 {
			o, n := old.DeepCopy(), cur.DeepCopy()
			o.Name, n.Name = fmt.Sprintf("c-%04d", i), fmt.Sprintf("c-%04d", i)
			o.SelfLink = strings.Clone(o.SelfLink)
			p.Update(event.UpdateEvent{ObjectOld: o, ObjectNew: n})
		}
		return c
	})
	t.Logf("the latest change of a 16-key ConfigMap: %d bytes per source in the table", retained/1000)
	small := NewChanges(2)
	sp := small.Observe(ConfigMaps)
	for i := range 3 {
		o, n := old.DeepCopy(), cur.DeepCopy()
		o.Name, n.Name = fmt.Sprintf("c-%d", i), fmt.Sprintf("c-%d", i)
		sp.Update(event.UpdateEvent{ObjectOld: o, ObjectNew: n})
	}
	for i, want := range []bool{false, true, true} {
		n := cur.DeepCopy()
		n.Name = fmt.Sprintf("c-%d", i)
		if _, ok := small.keys(ConfigMaps, "ns", source.ID{Kind: source.ConfigMap, Name: n.Name}, n, nil, ""); ok != want {
			t.Errorf("a full table of 2 after 3 changes: c-%d kept %v, want %v (the oldest goes)", i, ok, want)
		}
	}
	p.Delete(event.DeleteEvent{Object: cur})
	if _, ok := c.keys(ConfigMaps, "ns", id, cur, nil, ""); ok {
		t.Error("a deleted source's change is still kept")
	}
}

// TestPackedKeepsTheWriter: the writer token sits between the hashes and the digests, and
// every part reads back as it went in, with and without a writer.
func TestPackedKeepsTheWriter(t *testing.T) {
	for _, p := range []packed{
		{hash: "ab12", writer: "team-a|Apply|1764190800||1f"},
		{hash: "k1:ab12", uidHash: "cd34", writer: "helm|Update|1764190700||2,kubectl-edit|Update||status|ffffffff", digests: map[string]string{"password": "04", "user": "05"}},
		{hash: "ab12", digests: map[string]string{"a": "01"}},
	} {
		o := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{SelfLink: p.marked()}}
		st := SourceType{UIDHash: func(client.Object) string { return "full object" }}
		if st.contentHash(o) != p.hash || st.uidHash(o) != p.uidHash || len(st.keyDigests(o)) != len(p.digests) {
			t.Errorf("%q: hash %q, UID-keyed %q, digests %v", p.marked(), st.contentHash(o), st.uidHash(o), st.keyDigests(o))
		}
		for k, d := range p.digests {
			if st.keyDigests(o)[k] != d {
				t.Errorf("%q: digest of %s %q, want %q", p.marked(), k, st.keyDigests(o)[k], d)
			}
		}
		es := entries(o)
		if packed := whatchanged.Pack(es); packed != p.writer {
			t.Errorf("%q: entries %q, want %q", p.marked(), packed, p.writer)
		}
		if _, ok := st.writer(o); ok != (p.writer != "") {
			t.Errorf("%q: writer known %v", p.marked(), ok)
		}
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
		out, err := ConfigMaps.Transform(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}, Data: d})
		testutil.Must(t, err)
		objs[i] = out.(*corev1.ConfigMap)
	}
	c := NewChanges(0)
	p := c.Observe(ConfigMaps)
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
		{ConfigMaps.contentHash(objs[0]), nil, "keys changed: a, b, c"},
		{ConfigMaps.contentHash(objs[1]), nil, "keys changed: b, c"},
		{"not kept", nil, "keys changed: c"},
		{ConfigMaps.hashOf(objs[0], []string{"a"}, true), []string{"a"}, "keys changed: a"},
		// a=2 applied already: nothing of a changed since.
		{ConfigMaps.hashOf(objs[1], []string{"a"}, true), []string{"a"}, ""},
	} {
		k, ok := c.keys(ConfigMaps, "ns", id, now, tc.only, tc.applied)
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
		out, err := ConfigMaps.Transform(cm)
		testutil.Must(t, err)
		return out.(*corev1.ConfigMap)
	}
	forged := metav1.NewTime(time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC))
	old := managedConfigMap("c", 2, "v1")
	old.ManagedFields = append(old.ManagedFields, metav1.ManagedFieldsEntry{Manager: "security-bot", Operation: "Update", Time: &forged})
	cur := old.DeepCopy()
	cur.Data["key-00"] = "v2"
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	cur.ManagedFields = append(cur.ManagedFields, metav1.ManagedFieldsEntry{Manager: "real-writer", Operation: "Update", Time: &now,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{"f:key-00":{}}}`)}})
	o, c := transform(old), transform(cur)
	if w, _ := ConfigMaps.writer(c); w.Manager != "real-writer" {
		t.Errorf("newest writer %s", w)
	}
	w, ok := changeWriter(o, c)
	if !ok || w.String() != "field manager real-writer (Update at "+now.UTC().Format(time.RFC3339)+", reported by the API server)" {
		t.Errorf("writer of the change %q, %v", w, ok)
	}
	ch := NewChanges(0)
	ch.Observe(ConfigMaps).Update(event.UpdateEvent{ObjectOld: o, ObjectNew: c})
	if w, ok := ch.writer(ConfigMaps, "ns", source.ID{Kind: source.ConfigMap, Name: "c"}, c); !ok || w.Manager != "real-writer" {
		t.Errorf("the table's writer %q, %v", w, ok)
	}
}

// TestChangesFloodOfOneNamespaceKeepsAnothers: a namespace that changes 5,000 ConfigMaps
// drops its own oldest changes, not another namespace's: B's change still names its keys.
func TestChangesFloodOfOneNamespaceKeepsAnothers(t *testing.T) {
	transform := func(cm *corev1.ConfigMap) *corev1.ConfigMap {
		out, err := ConfigMaps.Transform(cm)
		testutil.Must(t, err)
		return out.(*corev1.ConfigMap)
	}
	changed := func(ns, name string) (old, cur *corev1.ConfigMap) {
		o, n := managedConfigMap(name, 2, "v1"), managedConfigMap(name, 2, "v1")
		n.Data["key-01"] = "v2"
		o.Namespace, n.Namespace = ns, ns
		return transform(o), transform(n)
	}
	c := NewChanges(0)
	p := c.Observe(ConfigMaps)
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
	k, ok := c.keys(ConfigMaps, "tenant-b", source.ID{Kind: source.ConfigMap, Name: "app"}, bCur, nil, "")
	if !ok || k.String() != "keys changed: key-01" {
		t.Errorf("tenant-b's change after tenant-a's flood: %q, %v; want its keys named", k.String(), ok)
	}
	// A's latest change is kept, its oldest dropped.
	_, aCur := changed("tenant-a", "cm-4999")
	if _, ok := c.keys(ConfigMaps, "tenant-a", source.ID{Kind: source.ConfigMap, Name: "cm-4999"}, aCur, nil, ""); !ok {
		t.Error("tenant-a's latest change was dropped")
	}
	_, aFirst := changed("tenant-a", "cm-0")
	if _, ok := c.keys(ConfigMaps, "tenant-a", source.ID{Kind: source.ConfigMap, Name: "cm-0"}, aFirst, nil, ""); ok {
		t.Error("tenant-a's oldest change is still kept past its share")
	}
}
