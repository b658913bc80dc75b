package controller

import (
	"bytes"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
)

// A start-up baseline of a workload restricted to key a is hashed over key a: a change of
// another key made before its first reconcile is no change, a change of a is.
func TestBaselineOfRestrictedWorkload(t *testing.T) {
	id := source.ID{Kind: source.ConfigMap, Name: "cfg"}
	cached := func(a, b string) client.Object {
		o, err := ConfigMaps.Transform(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}, Data: map[string]string{"a": a, "b": b}})
		if err != nil {
			t.Fatal(err)
		}
		return o.(client.Object)
	}
	onlyA := func(_ source.ID, o client.Object) string { return ConfigMaps.hashOf(o, []string{"a"}, true) }
	before := cached("1", "1")
	tests := []struct {
		name   string
		now    client.Object
		noted  bool // the handlers noted the change on the workload (else they only handled it)
		reload bool
	}{
		{"other key changed, handled", cached("1", "2"), false, false},
		{"other key changed, noted", cached("1", "2"), true, false},
		{"listed key changed, handled", cached("2", "1"), false, true},
		{"listed key changed, noted", cached("2", "1"), true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Baselines
			b.setHandled("ns", id, before)
			if tt.noted {
				b.before("uid", id, before)
				b.setHandled("ns", id, tt.now)
			}
			current := map[source.ID]string{id: onlyA(id, tt.now)}
			base := b.of("uid", "ns", current, onlyA)
			changed, _ := reload.Diff(base, base != nil, current, reload.Events{})
			if (len(changed) > 0) != tt.reload {
				t.Errorf("baseline %v: changed %v, want reload %v", base, changed, tt.reload)
			}
		})
	}
}

// rebase treats a Secret's subset hash like its whole hash: made by another install key, it is
// re-based and reloads nothing; made by the same key, it is compared, and a change reloads.
func TestRebaseOfSubsetHashes(t *testing.T) {
	id := source.ID{Kind: source.Secret, Name: "db"}
	key := func(b byte) hash.Key {
		k, err := hash.NewKey(bytes.Repeat([]byte{b}, hash.KeySize))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	// seen is the Secret as a workload restricted to its password sees it, under a key.
	seen := func(k hash.Key, user, password string) observed {
		st := Secrets(k)
		o, err := st.Transform(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "u1"},
			Data: map[string][]byte{"user": []byte(user), "password": []byte(password)}})
		if err != nil {
			t.Fatal(err)
		}
		seen := observed{snapshot: st.snapshot(o.(client.Object)), keys: []string{"password"}, restricted: true}
		seen.hash = st.hashOf(seen.obj, seen.keys, true)
		return seen
	}
	k1, k2 := key(1), key(2)
	old := seen(k1, "app", "pw")
	tests := []struct {
		name   string
		last   string
		now    observed
		reload bool
	}{
		{"same key, other key changed", old.hash, seen(k1, "root", "pw"), false},
		{"same key, password changed", old.hash, seen(k1, "app", "pw2"), true},
		{"new install key", old.hash, seen(k2, "app", "pw"), false},
		{"UID-keyed record of the same content", old.uidHash, seen(k2, "app", "pw"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			current := map[source.ID]observed{id: tt.now}
			last := rebase(reload.Record{id.String(): tt.last}, current)
			changed, next := reload.Diff(last, true, map[source.ID]string{id: tt.now.hash}, reload.Events{})
			if (len(changed) > 0) != tt.reload {
				t.Errorf("record %q, now %q: changed %v, want reload %v", tt.last, tt.now.hash, changed, tt.reload)
			}
			if next[id.String()] != tt.now.hash {
				t.Errorf("recorded %q, want %q", next[id.String()], tt.now.hash)
			}
		})
	}
}
