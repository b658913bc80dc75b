package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/hashkey"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/waves"
)

// TestResumeAndAbortCommands runs `reloader resume` and `abort` against a real API server:
// each writes its annotation naming the source's content hash as the controller computes it
// (a Secret's under reloader's hash key), or the content given; without the key a Secret
// needs --content.
func TestResumeAndAbortCommands(t *testing.T) {
	t.Setenv("RELOADER_NAMESPACE", "")
	t.Setenv("POD_NAMESPACE", "")
	ctx := context.Background()
	cluster, c := startCluster(t)
	secretKey := bytes.Repeat([]byte{7}, hash.KeySize)
	key, err := hash.NewKey(secretKey)
	testutil.Must(t, err)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "cli", Name: "shared"}, Data: map[string]string{"k": "v"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "cli", Name: "bundle"}, Data: map[string][]byte{"ca": []byte("x")}}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cli"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "reloader"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "reloader", Name: hashkey.SecretName}, Data: map[string][]byte{"key": secretKey}},
		cm, secret,
	} {
		testutil.Must(t, c.Create(ctx, o))
	}
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		root := newRootCommand(nil)
		root.SetArgs(append(args, "--kubeconfig", cluster.Kubeconfig, "-n", "cli"))
		root.SetOut(&out)
		root.SetErr(&bytes.Buffer{})
		err := root.Execute()
		return out.String(), err
	}
	annotation := func(o client.Object, key string) string {
		t.Helper()
		testutil.Must(t, c.Get(ctx, client.ObjectKeyFromObject(o), o))
		return o.GetAnnotations()[key]
	}

	out, err := run("resume", "configmap/shared")
	testutil.Must(t, err)
	want := sourcecache.ConfigMaps.Hash(cm)
	if got := annotation(cm, waves.ResumeAnnotation); got != want {
		t.Errorf("resume wrote %q, want the ConfigMap's hash %q (output %q)", got, want, out)
	}
	if !strings.Contains(out, waves.Short(want)) {
		t.Errorf("resume output %q does not name the content %s", out, waves.Short(want))
	}

	if _, err := run("abort", "secret/bundle", "--reloader-namespace", "nowhere"); err == nil || !strings.Contains(err.Error(), "--content") {
		t.Errorf("abort of a Secret without the hash key: %v, want an error pointing to --content", err)
	}
	_, err = run("abort", "secret/bundle", "--reloader-namespace", "reloader")
	testutil.Must(t, err)
	if got, want := annotation(secret, waves.AbortAnnotation), sourcecache.Secrets(key).Hash(secret); got != want || !strings.HasPrefix(got, key.ID()+":") {
		t.Errorf("abort wrote %q, want the Secret's keyed hash %q", got, want)
	}

	_, err = run("abort", "secret/bundle", "--content", "0123456789abcdef")
	testutil.Must(t, err)
	if got := annotation(secret, waves.AbortAnnotation); got != "0123456789abcdef" {
		t.Errorf("abort --content wrote %q", got)
	}
	if _, err := run("resume", "secret/bundle", "--content", "0123"); err == nil {
		t.Errorf("resume --content 0123: no error, want one (too short to name a content)")
	}
	if _, err := run("resume", "deployment/web"); err == nil || !strings.Contains(err.Error(), "configmap or a secret") {
		t.Errorf("resume deployment/web: %v, want an error", err)
	}
}
