package hashkey_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/hashkey"
	"github.com/reloader-operator/reloader/internal/localcluster"
	"github.com/reloader-operator/reloader/internal/localcluster/clustertest"
)

var (
	k8s     client.Client
	cluster *localcluster.Cluster
)

func TestMain(m *testing.M) {
	clustertest.Main(m, localcluster.Options{}, func(c *localcluster.Cluster) (err error) {
		cluster = c
		k8s, err = client.New(c.Config, client.Options{})
		return err
	})
}

func namespace(t *testing.T, name string) string {
	t.Helper()
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestReplicasStartingTogetherShareOneKey: eight replicas load the key at once in a namespace
// without one; one creates the Secret, the others read it, and all hash alike. A restart reads
// the same key.
func TestReplicasStartingTogetherShareOneKey(t *testing.T) {
	ns := namespace(t, "race")
	ids := make([]string, 8)
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			k, err := hashkey.Load(context.Background(), k8s, ns)
			ids[i], errs[i] = k.ID(), err
		})
	}
	wg.Wait()
	for i := range ids {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("replicas got different keys: %v", ids)
		}
	}
	s := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: hashkey.SecretName}, s); err != nil {
		t.Fatal(err)
	}
	if s.Immutable == nil || !*s.Immutable {
		t.Error("key Secret is not immutable")
	}
	again, err := hashkey.Load(context.Background(), k8s, ns)
	if err != nil || again.ID() != ids[0] {
		t.Errorf("restart read key %s (%v), want %s", again.ID(), err, ids[0])
	}
}

// TestBrokenKeyIsNeverReplaced: a key Secret of the wrong size is an error that says what to
// do; overwriting it could leave replicas hashing with different keys.
func TestBrokenKeyIsNeverReplaced(t *testing.T) {
	ns := namespace(t, "broken")
	bad := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hashkey.SecretName},
		Data: map[string][]byte{"key": []byte("short")}}
	if err := k8s.Create(context.Background(), bad); err != nil {
		t.Fatal(err)
	}
	if _, err := hashkey.Load(context.Background(), k8s, ns); err == nil {
		t.Fatal("a 5-byte key was accepted")
	}
	got := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(bad), got); err != nil || string(got.Data["key"]) != "short" {
		t.Errorf("broken key Secret was changed: %v %q", err, got.Data["key"])
	}
}

func TestNamespace(t *testing.T) {
	tests := []struct {
		own     string
		watched []string
		want    string
		isOwn   bool
	}{
		{"reloader", []string{"a"}, "reloader", true},
		{"", []string{"a", "b"}, "a", false},
		{"", []string{"b", "a"}, "a", false},
		{"", nil, hashkey.FallbackNamespace, false},
	}
	for _, tt := range tests {
		if got, own := hashkey.Namespace(tt.own, tt.watched); got != tt.want || own != tt.isOwn {
			t.Errorf("Namespace(%q, %v) = %q, %v; want %q, %v", tt.own, tt.watched, got, own, tt.want, tt.isOwn)
		}
	}
}

// TestWithoutRBACSecretsAreKeyedByUID: with RBAC made for upstream, which grants nothing on
// the key's Secret, loading ends at once without a key, and Secrets are hashed as releases
// before the key did, so reloading goes on after a drop-in swap of the image.
func TestWithoutRBACSecretsAreKeyedByUID(t *testing.T) {
	ns := namespace(t, "no-rbac")
	cfg, _, err := cluster.AddUser("upstream-rbac")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := hashkey.Setup(ctx, cfg, ns, nil, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Wait(); err != nil {
		t.Fatalf("Wait: %v; want the UID-keyed fallback at once", err)
	}
	if l.Key().Valid() {
		t.Fatal("a key was loaded without any RBAC")
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db", UID: "u-1"}, Data: map[string][]byte{"p": []byte("x")}}
	if got, want := hash.Secret(l.Key(), s), hash.UIDKeyedSecret(s); got != want {
		t.Errorf("hash without key = %q, want the UID-keyed %q", got, want)
	}
}
