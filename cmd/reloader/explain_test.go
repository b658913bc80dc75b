package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/explain"
	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/hashkey"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testutil"
)

func TestPluginName(t *testing.T) {
	for argv0, want := range map[string]bool{
		"/usr/local/bin/kubectl-reloader": true,
		"kubectl-reloader.exe":            true,
		"./bin/reloader":                  false,
		"/reloader":                       false,
	} {
		if got := isPlugin(argv0); got != want {
			t.Errorf("isPlugin(%q) = %v, want %v", argv0, got, want)
		}
	}
}

// startCluster starts a local control plane for one test, stopped when it ends, and a client
// of it. (Not a TestMain: the package's unit and fuzz tests need none.)
func startCluster(t *testing.T) (*testenv.Cluster, client.Client) {
	t.Helper()
	cluster, err := testenv.Start(context.Background(), testenv.Options{})
	testutil.Must(t, err)
	t.Cleanup(func() { _ = cluster.Stop() })
	c, err := client.New(cluster.Config, client.Options{})
	testutil.Must(t, err)
	return cluster, c
}

// TestExplainCommand runs `reloader explain` and `kubectl reloader explain` against a real API
// server: the namespace comes from the --context given, -o json parses back.
func TestExplainCommand(t *testing.T) {
	ctx := context.Background()
	cluster, c := startCluster(t)
	tpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox",
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}}},
	}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cli"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "cli", Name: "cfg"}, Data: map[string]string{"k": "v"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "cli", Name: "web", Annotations: map[string]string{"example.com/auto": "true"}},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: tpl.Labels}, Template: tpl}},
	} {
		testutil.Must(t, c.Create(ctx, o))
	}
	// A kubeconfig whose context "cli" defaults to namespace cli.
	kc, err := clientcmd.LoadFromFile(cluster.Kubeconfig)
	testutil.Must(t, err)
	cli := kc.Contexts[kc.CurrentContext].DeepCopy()
	cli.Namespace = "cli"
	kc.Contexts["cli"] = cli
	path := filepath.Join(t.TempDir(), "kubeconfig")
	testutil.Must(t, clientcmd.WriteToFile(*kc, path))

	var out bytes.Buffer
	plugin := newPluginCommand()
	plugin.SetArgs([]string{"explain", "deploy/web", "--kubeconfig", path, "--context", "cli", "-o", "json", "--auto-annotation", "example.com/auto"})
	plugin.SetOut(&out)
	testutil.Must(t, plugin.Execute())
	var w explain.Workload
	if err := json.Unmarshal(out.Bytes(), &w); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if w.Namespace != "cli" || w.Next.Action != explain.ActionRecord || len(w.Sources) != 1 || !w.Sources[0].Reloads {
		t.Errorf("explained as %+v", w)
	}

	out.Reset()
	root := newRootCommand(nil)
	root.SetArgs([]string{"explain", "configmaps/cfg", "--kubeconfig", path, "-n", "cli", "--auto-annotation", "example.com/auto"})
	root.SetOut(&out)
	testutil.Must(t, root.Execute())
	if !strings.Contains(out.String(), "Deployment/web") {
		t.Errorf("explain configmap/cfg did not list Deployment/web:\n%s", out.String())
	}
	root = newRootCommand(nil)
	root.SetArgs([]string{"explain", "pods/web", "--kubeconfig", path})
	root.SetErr(&bytes.Buffer{})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "unknown kind") {
		t.Errorf("explain pods/web: %v, want unknown kind", err)
	}
}

// TestExplainReadsTheKeyOnlyInReloadersNamespace: a Secret named like the hash key in the
// explained namespace, in a watched one or in default is not reloader's key and is never
// read: without --reloader-namespace, explain looks in reloader's namespace only (here
// "reloader", absent) and says the Secret's state is unknown.
func TestExplainReadsTheKeyOnlyInReloadersNamespace(t *testing.T) {
	t.Setenv("RELOADER_NAMESPACE", "")
	t.Setenv("POD_NAMESPACE", "")
	ctx := context.Background()
	cluster, c := startCluster(t)
	decoy := bytes.Repeat([]byte{9}, hash.KeySize)
	key, err := hash.NewKey(decoy)
	testutil.Must(t, err)
	db := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "cli", Name: "db"}, Data: map[string][]byte{"p": []byte("x")}}
	tpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox",
			EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}}}}}}},
	}
	testutil.Must(t, cluster.EnsureNamespace(ctx, c, "default"))
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cli"}},
		db,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "cli", Name: hashkey.SecretName}, Data: map[string][]byte{"key": decoy}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: hashkey.SecretName}, Data: map[string][]byte{"key": decoy}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "cli", Name: "web", Annotations: map[string]string{
			"reloader.stakater.com/auto": "true",
			reload.RecordAnnotation:      reload.Record{"secret/db": hash.Secret(key, db)}.Encode(),
		}}, Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: tpl.Labels}, Template: tpl}},
	} {
		testutil.Must(t, c.Create(ctx, o))
	}
	explainDB := func(extra ...string) explain.SourceDecision {
		t.Helper()
		var out bytes.Buffer
		root := newRootCommand(nil)
		root.SetArgs(append([]string{"explain", "deploy/web", "--kubeconfig", cluster.Kubeconfig, "-n", "cli", "--namespaces=cli", "-o", "json"}, extra...))
		root.SetOut(&out)
		testutil.Must(t, root.Execute())
		var w explain.Workload
		if err := json.Unmarshal(out.Bytes(), &w); err != nil || len(w.Sources) != 1 {
			t.Fatalf("%v: %s", err, out.String())
		}
		return w.Sources[0]
	}
	if s := explainDB(); s.State != explain.StateUnknown {
		t.Errorf("secret/db is %q with a key found outside reloader's namespace; want %q", s.State, explain.StateUnknown)
	}
	// Named as reloader's namespace, the same Secret is the key.
	if s := explainDB("--reloader-namespace", "cli"); s.State != explain.StateUnchanged {
		t.Errorf("secret/db with --reloader-namespace cli is %q, want %q", s.State, explain.StateUnchanged)
	}
}
