package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/explain"
	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// runPlan runs `reloader plan args...` (`kubectl reloader plan` with plugin) with stdin, and
// returns its output and exit status.
func runPlan(t *testing.T, plugin bool, stdin string, args ...string) (string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newRootCommand(nil)
	if plugin {
		cmd = newPluginCommand()
	}
	cmd.SetArgs(append([]string{"plan"}, args...))
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetIn(strings.NewReader(stdin))
	err := cmd.Execute()
	if err != nil && exitStatus(err) == 1 {
		return err.Error(), 1
	}
	if errOut.Len() > 0 {
		t.Errorf("plan printed to stderr: %s", errOut.String())
	}
	return out.String(), exitStatus(err)
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	testutil.Must(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

// TestPlanCommand: exit status 2 when something would roll, 0 when nothing would, from a
// file, standard input, or a live object against a file; -o json parses back.
func TestPlanCommand(t *testing.T) {
	ctx := context.Background()
	cluster, c := startCluster(t)
	cfg := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "cli", Name: "cfg"}, Data: map[string]string{"k": "v1"}}
	tpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox",
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}}},
	}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cli"}},
		cfg,
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "cli", Name: "web", Annotations: map[string]string{
			"example.com/auto":      "true",
			reload.RecordAnnotation: reload.Record{"configmap/cfg": hash.ConfigMap(cfg)}.Encode(),
		}}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](5), Selector: &metav1.LabelSelector{MatchLabels: tpl.Labels}, Template: tpl}},
	} {
		testutil.Must(t, c.Create(ctx, o))
	}
	flags := []string{"--kubeconfig", cluster.Kubeconfig, "--auto-annotation", "example.com/auto", "--reloader-namespace", "cli"}
	changed := writeFile(t, "changed.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n  namespace: cli\ndata:\n  k: v2\n")
	same := writeFile(t, "same.yaml", "---\n# the live content\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n  namespace: cli\ndata:\n  k: v1\n---\n")

	out, code := runPlan(t, false, "", append([]string{"-f", changed}, flags...)...)
	if code != 2 || !strings.Contains(out, "deployment/web  yes    5") || !strings.Contains(out, "1 workload would roll, 5 pods, in 1 namespace; the last in 300ms") {
		t.Errorf("plan of a change: exit %d, output:\n%s", code, out)
	}
	t.Logf("reloader plan -f changed.yaml:\n%s", out)
	if out, code := runPlan(t, true, "", append([]string{"-f", same}, flags...)...); code != 0 || !strings.Contains(out, "Nothing would roll.") {
		t.Errorf("plan of the live content: exit %d, output:\n%s", code, out)
	}
	// The live object against a nameless document from standard input, in JSON.
	out, code = runPlan(t, true, `{"apiVersion":"v1","kind":"ConfigMap","data":{"k":"v3"}}`, append([]string{"cm/cfg", "-n", "cli", "-f", "-", "-o", "json"}, flags...)...)
	var plan explain.Plan
	if err := json.Unmarshal([]byte(out), &plan); err != nil || code != 2 {
		t.Fatalf("exit %d, %v: %s", code, err, out)
	}
	if plan.APIVersion != explain.PlanAPIVersion || plan.Summary.Workloads != 1 || plan.Summary.Pods != 5 || plan.Sources[0].Name != "cfg" {
		t.Errorf("planned as %+v", plan)
	}
}

// TestPlanBadInput: what is not a ConfigMap or Secret, too big, or not valid fails with a
// clear error, before any request (the kubeconfig here points nowhere).
func TestPlanBadInput(t *testing.T) {
	nowhere := writeFile(t, "kubeconfig", "apiVersion: v1\nkind: Config\nclusters: []\n")
	big := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  k: " + strings.Repeat("x", 2<<20) + "\n"
	for _, tt := range []struct {
		name, content string
		args          []string
		want          string
	}{
		{"deployment", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n", nil, `apps/v1 Deployment "web": only v1 ConfigMaps and Secrets can be planned`},
		{"2 MiB", big, nil, "is over 1536 KiB"},
		{"invalid YAML", "apiVersion: v1\nkind: ConfigMap\ndata: [unclosed\n", nil, "document 1: not valid YAML"},
		{"second document", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\nkind: [\n", nil, "document 2"},
		{"no kind", "metadata:\n  name: x\n", nil, "a document without apiVersion and kind"},
		{"misspelt field", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndatta:\n  k: v\n", nil, `unknown field "datta"`},
		{"bad key", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  \"a b\": v\n", nil, `key "a b"`},
		{"empty", "---\n", nil, "holds no document"},
		{"no name", "apiVersion: v1\nkind: Secret\nstringData:\n  p: x\n", nil, "a Secret without a name"},
		{"pod target", "apiVersion: v1\nkind: Secret\n", []string{"pod/x"}, "unknown kind"},
		{"workload target", "apiVersion: v1\nkind: ConfigMap\n", []string{"deploy/web"}, "not a workload"},
		{"wrong kind target", "apiVersion: v1\nkind: ConfigMap\n", []string{"secret/db"}, "holds a ConfigMap, not a Secret"},
		{"two namespaces", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: ns-a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  namespace: ns-b\n", nil, "plan one namespace at a time"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append(tt.args, "-f", writeFile(t, "in.yaml", tt.content), "--kubeconfig", nowhere, "-n", "")
			if tt.name == "two namespaces" {
				args = args[:len(args)-2]
			}
			out, code := runPlan(t, false, "", args...)
			if code != 1 || !strings.Contains(out, tt.want) {
				t.Errorf("exit %d, error %q; want 1 and %q", code, out, tt.want)
			}
		})
	}
	if out, code := runPlan(t, false, "", "--kubeconfig", nowhere); code != 1 || !strings.Contains(out, "-f FILE is required") {
		t.Errorf("without -f: exit %d, %q", code, out)
	}
}

func TestExitStatus(t *testing.T) {
	for err, want := range map[error]int{nil: 0, exitCode(2): 2, os.ErrNotExist: 1} {
		if got := exitStatus(err); got != want {
			t.Errorf("exitStatus(%v) = %d, want %d", err, got, want)
		}
	}
}
