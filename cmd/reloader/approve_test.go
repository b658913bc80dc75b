package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/approval"
	"github.com/reloader-operator/reloader/internal/explain"
	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/hashkey"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// TestApproveCommand runs `kubectl reloader approve` against a real API server: a workload
// whose record names an older content of its ConfigMap waits for approval (the command takes
// mode approve where nothing sets one); the command writes the digest of the due content,
// the one explain shows, and refuses a --digest of another content.
func TestApproveCommand(t *testing.T) {
	ctx := context.Background()
	cluster, c := startCluster(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "cli", Name: "cfg"}, Data: map[string]string{"k": "v2"}}
	tpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox",
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}}},
	}
	web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "cli", Name: "web", Annotations: map[string]string{
		"reloader.stakater.com/auto": "true",
		reload.RecordAnnotation:      reload.Record{"configmap/cfg": "an-older-content"}.Encode(),
	}}, Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: tpl.Labels}, Template: tpl}}
	for _, o := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cli"}}, cm, web} {
		testutil.Must(t, c.Create(ctx, o))
	}
	due := approval.Digest([]reload.Change{{ID: source.ID{Kind: source.ConfigMap, Name: "cfg"}, Hash: hash.ConfigMap(cm)}})
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		plugin := newPluginCommand()
		// No coalescing window: the objects were written moments ago, and explain (which
		// approve asks) would wait for them to be quiet.
		plugin.SetArgs(append(args, "--kubeconfig", cluster.Kubeconfig, "-n", "cli", "--coalesce-window=0"))
		plugin.SetOut(&out)
		plugin.SetErr(&bytes.Buffer{})
		err := plugin.Execute()
		return out.String(), err
	}

	out, err := run("explain", "deploy/web", "-o", "json", "--mode=approve")
	testutil.Must(t, err)
	var w explain.Workload
	testutil.Must(t, json.Unmarshal([]byte(out), &w))
	if w.Next.Approval != due || w.Next.HeldBy != approval.HoldReason {
		t.Fatalf("explain --mode=approve: next %+v; want held for approval of %s", w.Next, due)
	}

	if _, err := run("approve", "deploy/web", "--digest", "0123456789abcdef0123456789abcdef"); err == nil || !strings.Contains(err.Error(), "changed since") {
		t.Errorf("approve --digest of another content: %v; want refused", err)
	}
	if _, err := run("approve", "deploy/web", "--digest", "yes"); err == nil || !strings.Contains(err.Error(), "--digest") {
		t.Errorf("approve --digest yes: %v; want refused as no digest", err)
	}
	if _, err := run("approve", "configmap/cfg"); err == nil || !strings.Contains(err.Error(), "takes a workload") {
		t.Errorf("approve configmap/cfg: %v; want refused", err)
	}
	got := &appsv1.Deployment{}
	testutil.Must(t, c.Get(ctx, client.ObjectKeyFromObject(web), got))
	if v, ok := got.Annotations[approval.ApprovedAnnotation]; ok {
		t.Fatalf("a refused approval wrote %q", v)
	}

	out, err = run("explain", "deploy/web", "--mode=notify")
	testutil.Must(t, err)
	t.Logf("explain --mode=notify:\n%s", out)
	if !strings.Contains(out, "Next reconcile: notify configmap/cfg") {
		t.Errorf("explain --mode=notify does not say notify:\n%s", out)
	}

	out, err = run("approve", "deploy/web", "--digest", due)
	testutil.Must(t, err)
	t.Logf("approve: %s", out)
	if !strings.Contains(out, "approved "+due+" (configmap/cfg)") {
		t.Errorf("approve printed %q", out)
	}
	testutil.Must(t, c.Get(ctx, client.ObjectKeyFromObject(web), got))
	if v := got.Annotations[approval.ApprovedAnnotation]; v != due {
		t.Errorf("%s = %q after approve, want %s", approval.ApprovedAnnotation, v, due)
	}

	// The workload's own mode says reload: nothing waits for approval.
	testutil.Must(t, c.Patch(ctx, got, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"`+approval.ModeAnnotation+`":"reload"}}}`))))
	if _, err := run("approve", "deploy/web"); err == nil || !strings.Contains(err.Error(), "no reload waits for approval") {
		t.Errorf("approve of a workload in mode reload: %v; want nothing pending", err)
	}
}

// TestApproveWithoutTheKey: an approver who may get and patch the workload, and may not read
// reloader's hash key Secret, approves a pending Secret change: the command approves the
// digest reloader published on the workload, without reading the key, and still refuses a
// --digest of another content.
func TestApproveWithoutTheKey(t *testing.T) {
	ctx := context.Background()
	cluster, c := startCluster(t)
	tpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox",
			EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}}}}}},
	}
	published := approval.Digest([]reload.Change{{ID: source.ID{Kind: source.Secret, Name: "creds"}, Hash: "keyed-hash-of-v2"}})
	web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", Annotations: map[string]string{
		"reloader.stakater.com/auto": "true",
		approval.ModeAnnotation:      "approve",
		approval.PendingAnnotation:   published, // as reloader writes it while the reload waits
	}}, Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: tpl.Labels}, Template: tpl}}
	key := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: defaultKeyNamespace, Name: hashkey.SecretName}, Data: map[string][]byte{"key": []byte("0123456789abcdef0123456789abcdef")}}
	approver := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "approver"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "patch"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "approver"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "approver"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "approver"}}}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: defaultKeyNamespace}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "creds"}, Data: map[string][]byte{"password": []byte("v2")}},
		key, web, approver, binding,
	} {
		testutil.Must(t, c.Create(ctx, o))
	}
	userCfg, kubeconfig, err := cluster.AddUser("approver")
	testutil.Must(t, err)
	as, err := client.New(userCfg, client.Options{})
	testutil.Must(t, err)
	// The identity may not read the key: the premise of the test.
	if err := as.Get(ctx, client.ObjectKeyFromObject(key), &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the approver reads the hash key Secret: %v; want forbidden", err)
	}
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		plugin := newPluginCommand()
		plugin.SetArgs(append(args, "--kubeconfig", kubeconfig, "-n", "team"))
		plugin.SetOut(&out)
		plugin.SetErr(&bytes.Buffer{})
		err := plugin.Execute()
		return out.String(), err
	}
	other := approval.Digest([]reload.Change{{ID: source.ID{Kind: source.Secret, Name: "creds"}, Hash: "keyed-hash-of-v3"}})
	if _, err := run("approve", "deploy/web", "--digest", other); err == nil || !strings.Contains(err.Error(), "changed since") {
		t.Errorf("approve --digest of another content: %v; want refused", err)
	}
	if _, err := run("approve", "deploy/web", "--digest", published[:16]); err == nil || !strings.Contains(err.Error(), "64-bit digest") {
		t.Errorf("approve --digest of a 64-bit digest: %v; want refused, saying so", err)
	}
	got := &appsv1.Deployment{}
	testutil.Must(t, c.Get(ctx, client.ObjectKeyFromObject(web), got))
	if v, ok := got.Annotations[approval.ApprovedAnnotation]; ok {
		t.Fatalf("a refused approval wrote %q", v)
	}
	out, err := run("approve", "deploy/web", "--digest", published)
	testutil.Must(t, err)
	t.Logf("approve: %s", out)
	testutil.Must(t, c.Get(ctx, client.ObjectKeyFromObject(web), got))
	if v := got.Annotations[approval.ApprovedAnnotation]; v != published {
		t.Errorf("%s = %q after approve, want the published %s", approval.ApprovedAnnotation, v, published)
	}
	if !strings.Contains(out, "approved "+published) {
		t.Errorf("approve printed %q", out)
	}
}
