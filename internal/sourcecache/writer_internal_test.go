package sourcecache

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/whatchanged"
)

// TestCacheKeepsOnlyTheNewestWriters: of managedFields, the cache keeps the newest writers
// (whatchanged.MaxKept) in the packed string, about 40 bytes each, and the per-object cost
// grows by that.
func TestCacheKeepsOnlyTheNewestWriters(t *testing.T) {
	transform := func(cm *corev1.ConfigMap) *corev1.ConfigMap {
		out, err := ConfigMaps.Transform(cm)
		testutil.Must(t, err)
		return out.(*corev1.ConfigMap)
	}
	got := transform(testutil.ManagedConfigMap("c", 8, "v"))
	if got.ManagedFields != nil {
		t.Fatalf("the cache keeps %d managedFields entries", len(got.ManagedFields))
	}
	w, ok := ConfigMaps.Writer(got)
	if !ok || w.Short() != "kubectl-edit (Update at 2026-11-26T21:02:00Z)" {
		t.Errorf("cached writer %+v, %v", w, ok)
	}
	// Many objects, for a figure per object above the heap's noise.
	const n = 2000
	measure := func(withFields bool) uint64 {
		return testutil.RetainedBy(func() any {
			out := make([]*corev1.ConfigMap, n)
			for i := range out {
				cm := testutil.ManagedConfigMap(fmt.Sprintf("c-%04d", i), 8, "v")
				if !withFields {
					cm.ManagedFields = nil
				}
				out[i] = transform(cm)
			}
			return out
		})
	}
	bare := testutil.ManagedConfigMap("c", 8, "v")
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
		if st.ContentHash(o) != p.hash || st.uidHash(o) != p.uidHash || len(st.KeyDigestsOf(o)) != len(p.digests) {
			t.Errorf("%q: hash %q, UID-keyed %q, digests %v", p.marked(), st.ContentHash(o), st.uidHash(o), st.KeyDigestsOf(o))
		}
		for k, d := range p.digests {
			if st.KeyDigestsOf(o)[k] != d {
				t.Errorf("%q: digest of %s %q, want %q", p.marked(), k, st.KeyDigestsOf(o)[k], d)
			}
		}
		es := entries(o)
		if packed := whatchanged.Pack(es); packed != p.writer {
			t.Errorf("%q: entries %q, want %q", p.marked(), packed, p.writer)
		}
		if _, ok := st.Writer(o); ok != (p.writer != "") {
			t.Errorf("%q: writer known %v", p.marked(), ok)
		}
	}
}
