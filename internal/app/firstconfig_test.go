package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/app"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testutil"
)

const crdDir = "../../deployments/chart/reloader/files/crds"

// auditedWatches reads, from an audit log of every stage but the first, the resources user
// started watches of, each with the user agents that did.
func auditedWatches(t *testing.T, path, user string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	testutil.Must(t, err)
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e struct {
			Verb      string `json:"verb"`
			UserAgent string `json:"userAgent"`
			User      struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef struct {
				Resource string `json:"resource"`
			} `json:"objectRef"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.User.Username != user || e.Verb != "watch" {
			continue
		}
		if !slices.Contains(out[e.ObjectRef.Resource], e.UserAgent) {
			out[e.ObjectRef.Resource] = append(out[e.ObjectRef.Resource], e.UserAgent)
		}
	}
	testutil.Must(t, sc.Err())
	return out
}

// A cluster serves the ReloaderConfig API but holds none: reloader (as Run starts it) watches
// no ReloaderConfig beyond the wait for the first, and with Job reloads off no Job nor
// ControllerRevision, as the API server's audit log shows. A ReloaderConfig created then
// starts it again with ReloaderConfigs on, and applies: a ConfigMap that no annotation names
// reloads the Deployment the ReloaderConfig ties it to.
func TestReloaderConfigsStartWithTheFirst(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	policy, auditLog := filepath.Join(dir, "audit-policy.yaml"), filepath.Join(dir, "audit.log")
	testutil.Must(t, os.WriteFile(policy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n"), 0o644))
	cluster, err := testenv.Start(ctx, testenv.Options{CRDDirectoryPaths: []string{crdDir},
		APIServerFlags: map[string]string{"audit-policy-file": policy, "audit-log-path": auditLog, "audit-log-format": "json"}})
	testutil.Must(t, err)
	t.Cleanup(func() { _ = cluster.Stop() })
	const user = "first-config-reloader"
	userCfg, _, err := cluster.AddUser(user, "system:masters")
	testutil.Must(t, err)
	scheme, err := app.NewScheme()
	testutil.Must(t, err)
	k8s, err := client.New(cluster.Config, client.Options{Scheme: scheme})
	testutil.Must(t, err)

	ns := "first-config"
	testutil.Must(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}, Data: map[string]string{"v": "1"}}
	testutil.Must(t, k8s.Create(ctx, cm))
	labels := map[string]string{"app": "app"}
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app",
				EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}}}}}}}}}}
	testutil.Must(t, k8s.Create(ctx, deploy))

	opts := options.Default()
	opts.MetricsAddr, opts.V2HealthAddr = freeAddr(t), "0"
	opts.IgnoredWorkloadTypes = []string{"jobs"}
	conf, err := options.Parse(opts)
	testutil.Must(t, err)
	var starts atomic.Int32
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- app.Run(runCtx, userCfg, conf, logr.Discard(), func(ctx context.Context, mgr manager.Manager) error {
			starts.Add(1)
			return mgr.Start(ctx)
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	ready := func(n int32) func() error {
		return func() error {
			if code, _ := httpGet(opts.MetricsAddr, "/ready"); code != http.StatusOK || starts.Load() != n {
				return fmt.Errorf("/ready %d after %d starts, want 200 after %d", code, starts.Load(), n)
			}
			return nil
		}
	}
	testutil.Eventually(t, "ready (caches synced)", ready(1))
	watched := auditedWatches(t, auditLog, user)
	for _, r := range []string{"configmaps", "secrets", "deployments"} {
		if len(watched[r]) == 0 {
			t.Errorf("%s not watched; watches: %v", r, watched)
		}
	}
	for _, r := range []string{"jobs", "controllerrevisions"} {
		if len(watched[r]) > 0 {
			t.Errorf("%s watched with Job reloads off, by %v", r, watched[r])
		}
	}
	if got := watched["reloaderconfigs"]; len(got) != 1 || !strings.HasSuffix(got[0], "/reloader-first-config") {
		t.Errorf("reloaderconfigs watched by %q; want the wait for the first alone", got)
	}

	rc := &v1alpha1.ReloaderConfig{ObjectMeta: metav1.ObjectMeta{Name: "tie", Namespace: ns}, Spec: v1alpha1.ReloaderConfigSpec{
		Targets: []v1alpha1.Target{{Kind: "Deployment", Name: deploy.Name}},
		Sources: []v1alpha1.Source{{Kind: "ConfigMap", Name: cm.Name}}}}
	testutil.Must(t, k8s.Create(ctx, rc))
	testutil.Eventually(t, "ready again, with ReloaderConfigs on", ready(2))
	if got := auditedWatches(t, auditLog, user)["reloaderconfigs"]; len(got) < 2 {
		t.Errorf("reloaderconfigs watched by %q after the first was created; want their informer too", got)
	}
	testutil.Must(t, k8s.Get(ctx, client.ObjectKeyFromObject(deploy), deploy))
	before := deploy.Generation
	cm.Data["v"] = "2"
	testutil.Must(t, k8s.Update(ctx, cm))
	testutil.Eventually(t, "the Deployment reloaded for the ReloaderConfig", testutil.Cond(func() (bool, error) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(deploy), deploy)
		return err == nil && deploy.Generation > before, err
	}))
}
