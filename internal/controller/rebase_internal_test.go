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
	"github.com/reloader-operator/reloader/internal/sourcecache"
)

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
	seen := func(k hash.Key, user, password string) sourcecache.Observed {
		st := sourcecache.Secrets(k)
		o, err := st.Transform(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "u1"},
			Data: map[string][]byte{"user": []byte(user), "password": []byte(password)}})
		if err != nil {
			t.Fatal(err)
		}
		return st.ObservedAs(o.(client.Object), []string{"password"})
	}
	k1, k2 := key(1), key(2)
	old := seen(k1, "app", "pw")
	tests := []struct {
		name   string
		last   string
		now    sourcecache.Observed
		reload bool
	}{
		{"same key, other key changed", old.Hash(), seen(k1, "root", "pw"), false},
		{"same key, password changed", old.Hash(), seen(k1, "app", "pw2"), true},
		{"new install key", old.Hash(), seen(k2, "app", "pw"), false},
		{"UID-keyed record of the same content", old.UIDHash(), seen(k2, "app", "pw"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			current := map[source.ID]sourcecache.Observed{id: tt.now}
			last := rebase(reload.Record{id.String(): tt.last}, current)
			changed, next := reload.Diff(last, true, map[source.ID]string{id: tt.now.Hash()}, reload.Events{})
			if (len(changed) > 0) != tt.reload {
				t.Errorf("record %q, now %q: changed %v, want reload %v", tt.last, tt.now.Hash(), changed, tt.reload)
			}
			if next[id.String()] != tt.now.Hash() {
				t.Errorf("recorded %q, want %q", next[id.String()], tt.now.Hash())
			}
		})
	}
}
