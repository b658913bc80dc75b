package sourcecache

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/workload"
)

func TestTransformKeepsOnlyHashesAndIsIdempotent(t *testing.T) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "c", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Data:       map[string]string{"k": "v"},
		BinaryData: map[string][]byte{"b": {1}},
	}
	want, wantKeys := hash.ConfigMap(cm), hash.ConfigMapKeys(cm)
	for pass := 1; pass <= 2; pass++ {
		out, err := ConfigMaps.Transform(cm)
		if err != nil {
			t.Fatal(err)
		}
		got := out.(*corev1.ConfigMap)
		if got.Data != nil || got.BinaryData != nil || got.ManagedFields != nil || got.Annotations != nil {
			t.Fatalf("pass %d: content, managed fields or an annotation map kept in cache: %+v", pass, got)
		}
		if d := ConfigMaps.KeyDigestsOf(got); !maps.Equal(d, wantKeys) {
			t.Fatalf("pass %d: key digests %v, want %v", pass, d, wantKeys)
		}
		if h := ConfigMaps.ContentHash(got); h != want {
			t.Fatalf("pass %d: hash %s, want %s", pass, h, want)
		}
	}

	key, err := hash.NewKey(make([]byte, hash.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	secrets := Secrets(key)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", UID: "u1"}, Data: map[string][]byte{"p": []byte("x")}}
	want, wantUID, wantKeys := hash.Secret(key, s), hash.UIDKeyedSecret(s), hash.SecretKeys(key, s)
	for pass := 1; pass <= 2; pass++ {
		out, _ := secrets.Transform(s)
		got := out.(*corev1.Secret)
		if got.Data != nil || !maps.Equal(secrets.KeyDigestsOf(got), wantKeys) || secrets.ContentHash(got) != want || secrets.uidHash(got) != wantUID {
			t.Fatalf("pass %d: secret data kept or hash wrong: %q, %q", pass, got.Data, got.SelfLink)
		}
		if sub := secrets.HashOf(got, []string{"p"}, true); sub != hash.Subset(want, wantKeys, []string{"p"}) {
			t.Fatalf("pass %d: subset hash of the cached Secret %q", pass, sub)
		}
	}
}

// TestLabelsKeptUnlessDropped: a source's labels stay for ReloaderConfig selectors, and go
// with DropLabels, where no selector can read them.
func TestLabelsKeptUnlessDropped(t *testing.T) {
	for _, drop := range []bool{false, true} {
		st := ConfigMaps
		st.DropLabels = drop
		out, err := st.Transform(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{"team": "a"}}})
		if err != nil {
			t.Fatal(err)
		}
		if got := out.(client.Object).GetLabels(); (got == nil) != drop {
			t.Errorf("DropLabels %v: labels %v", drop, got)
		}
	}
}

// TestMarkedObjectKeepsNoDataInCache: an object that arrives already marked as transformed
// (the API server never sends a selfLink, see TestServerNeverSendsSelfLink) still has its
// content dropped: the mark never keeps data in memory.
func TestMarkedObjectKeepsNoDataInCache(t *testing.T) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "c", SelfLink: cacheMark + "0000 "},
		Data:       map[string]string{"k": strings.Repeat("x", 1<<20)},
		BinaryData: map[string][]byte{"b": make([]byte, 1<<20)},
	}
	out, err := ConfigMaps.Transform(cm)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.(*corev1.ConfigMap); got.Data != nil || got.BinaryData != nil {
		t.Fatalf("%d keys and %d binary keys of data kept in the cache", len(got.Data), len(got.BinaryData))
	}
}

// TestPackedSurvivesEveryShape: hashes and digests read back as they went in, with and without
// a UID-keyed hash and keys, including a Secret's key-ID-prefixed hash.
func TestPackedSurvivesEveryShape(t *testing.T) {
	for _, p := range []packed{
		{hash: "ab12"},
		{hash: "k1:ab12", uidHash: "cd34"},
		{hash: "ab12", digests: map[string]string{"a.b": "01", "-x_y": "02", "Z": "03"}},
		{hash: "k1:ab12", uidHash: "cd34", digests: map[string]string{"password": "04"}},
		{hash: "aa,bb"},
	} {
		o := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{SelfLink: p.marked()}}
		st := SourceType{UIDHash: func(client.Object) string { return "full object" }}
		if h := st.ContentHash(o); h != p.hash {
			t.Errorf("%q: hash %q, want %q", p.marked(), h, p.hash)
		}
		if h := st.uidHash(o); h != p.uidHash {
			t.Errorf("%q: UID-keyed hash %q, want %q", p.marked(), h, p.uidHash)
		}
		if d := st.KeyDigestsOf(o); len(d) != len(p.digests) || (len(d) > 0 && !maps.Equal(d, p.digests)) {
			t.Errorf("%q: digests %v, want %v", p.marked(), d, p.digests)
		}
	}
}

// TestCachedConfigMapHoldsKeysAndDigestsOnly: a 1 MiB ConfigMap takes, once transformed, its
// key names and one fixed-size digest per key; its values are not retained.
func TestCachedConfigMapHoldsKeysAndDigestsOnly(t *testing.T) {
	const keys = 16
	big := func() *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big"}, Data: map[string]string{}}
		for i := range keys {
			cm.Data[fmt.Sprintf("key-%02d", i)] = strings.Repeat(string(rune('a'+i)), 1<<20/keys)
		}
		return cm
	}
	transformed := func() any {
		out, err := ConfigMaps.Transform(big())
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	got := transformed().(*corev1.ConfigMap)
	if d := ConfigMaps.KeyDigestsOf(got); len(d) != keys {
		t.Errorf("cache holds %d key digests, want %d", len(d), keys)
	}
	// The mark, the hash, an empty UID-keyed hash, no writer, and per key its name and a digest.
	if want := len(cacheMark) + 64 + 1 + 1 + keys*(1+6+1+32); len(got.SelfLink) != want || got.Data != nil {
		t.Errorf("cache holds %d bytes of hashes and digests, want %d, and %d keys of data", len(got.SelfLink), want, len(got.Data))
	}
	full, cached := testutil.RetainedBy(func() any { return big() }), testutil.RetainedBy(transformed)
	t.Logf("1 MiB ConfigMap of %d keys: %d bytes held in full, %d once transformed", keys, full, cached)
	if full < 1<<20 {
		t.Skipf("the heap measure is unreliable here: a full ConfigMap holds %d bytes", full)
	}
	if cached > 16<<10 {
		t.Errorf("a transformed 1 MiB ConfigMap holds %d bytes", cached)
	}
}

// TestCachedSourceKeepsNoLastAppliedCopy: kubectl apply stores the whole object again in an
// annotation, a Secret's values in the clear; the cache must hold neither copy.
func TestCachedSourceKeepsNoLastAppliedCopy(t *testing.T) {
	key, err := hash.NewKey(make([]byte, hash.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	value := strings.Repeat("s", 64<<10)
	applied := fmt.Sprintf(`{"apiVersion":"v1","kind":"Secret","stringData":{"password":%q}}`, value)
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "s", Annotations: map[string]string{
			workload.LastAppliedAnnotation: applied, "team": "payments"}}
	}
	for name, tc := range map[string]struct {
		st  SourceType
		obj client.Object
	}{
		"Secret":    {Secrets(key), &corev1.Secret{ObjectMeta: meta(), Data: map[string][]byte{"password": []byte(value)}}},
		"ConfigMap": {ConfigMaps, &corev1.ConfigMap{ObjectMeta: meta(), Data: map[string]string{"password": value}}},
	} {
		t.Run(name, func(t *testing.T) {
			want := tc.st.Hash(tc.obj)
			out, err := tc.st.Transform(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			got := out.(client.Object).GetAnnotations()
			if _, kept := got[workload.LastAppliedAnnotation]; kept {
				t.Errorf("the cache keeps kubectl's last-applied copy (%d bytes)", len(got[workload.LastAppliedAnnotation]))
			}
			if got["team"] != "payments" {
				t.Errorf("the user's annotations are lost: %v", got)
			}
			if h := tc.st.ContentHash(out.(client.Object)); h != want {
				t.Errorf("cached hash %q, want %q: the annotation must not count in the content", h, want)
			}
		})
	}
}
