package e2e

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testenv/proc"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/testutil/objects"
	"github.com/reloader-operator/reloader/internal/testutil/records"
)

// get fetches url and returns the status code and body; 0 when unreachable.
func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var cachesSynced = regexp.MustCompile(`(?m)^reloader_caches_synced (\S+)$`)

// syncedGauge reads reloader_caches_synced from a /metrics body, or "" when absent.
func syncedGauge(body string) string {
	if m := cachesSynced.FindStringSubmatch(body); m != nil {
		return m[1]
	}
	return ""
}

// The built binary, given flags in the forms upstream's chart and users write them, starts,
// becomes ready and reloads. reloader_caches_synced is 0 while a watched kind's cache can't
// sync (a user without RBAC) and 1 once it has, as /ready.
func TestBinaryStartsWithUpstreamStyleArgs(t *testing.T) {
	t.Parallel() // its own control plane and reloader
	bin := buildReloader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, cl := startCluster(t, ctx, testenv.Options{})
	out := outputLoggedOnFailure(t)

	// No RBAC: the caches never sync.
	_, noRights, err := cluster.AddUser("nobody")
	testutil.Must(t, err)
	addr, err := proc.FreeAddr()
	testutil.Must(t, err)
	p, err := proc.Run(proc.Spec{Bin: bin, Kubeconfig: noRights, Prefix: "nobody | ", Out: out, Args: []string{"--metrics-addr=" + addr}})
	testutil.Must(t, err)
	testutil.Eventually(t, "/metrics of the unsynced reloader", testutil.Cond(func() (bool, error) {
		code, _ := get("http://" + addr + "/metrics")
		return code == http.StatusOK, nil
	}))
	time.Sleep(2 * time.Second) // the subject: a span in which, without rights, it never syncs
	_, body := get("http://" + addr + "/metrics")
	if code, _ := get("http://" + addr + "/ready"); code != http.StatusServiceUnavailable || syncedGauge(body) != "0" {
		t.Errorf("without RBAC: /ready %d, reloader_caches_synced %q; want 503 and 0", code, syncedGauge(body))
	}
	// Stopped as the kubelet stops a pod: one SIGTERM. controller-runtime alone would wait for
	// caches that can never sync; reloader exits by itself within its shutdown grace.
	stopped := time.Now()
	p.Stop()
	if took := time.Since(stopped); took > 25*time.Second {
		t.Errorf("an unsynced reloader took %v to exit after SIGTERM; want under 25s", took)
	}
	if p.ProcessState() == nil || p.ProcessState().Success() {
		t.Errorf("an unsynced reloader stopped by SIGTERM exited with %v; want a failure exit", p.ProcessState())
	}

	ns := "team-a"
	testutil.Must(t, cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"env": "test", "team": "a"}}}))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg", Labels: map[string]string{"reload": "yes"}}, Data: map[string]string{"k": "v1"}}
	d := objects.AutoDeployment(ns, "web", "cfg")
	for _, o := range []client.Object{cm, d} {
		testutil.Must(t, cl.Create(ctx, o))
	}
	addr, err = proc.FreeAddr()
	testutil.Must(t, err)
	args := []string{"--metrics-addr=" + addr,
		`--namespace-selector="env=test"`, "--namespace-selector", "team:*", // upstream's chart quotes; repeated; key:*
		`--resource-label-selector="reload=*"`,                                                    // key=*
		"--reload-on-create", "true", "--auto-reload-all", "false", "--reload-on-delete", "false", // space-separated booleans
		"--ignored-workload-types=Jobs,cronjob", "--log-format=json"}
	p, err = proc.Run(proc.Spec{Bin: bin, Kubeconfig: cluster.Kubeconfig, Prefix: "reloader | ", Out: out, Args: args})
	testutil.Must(t, err)
	t.Cleanup(p.Stop)
	testutil.Eventually(t, "/ready 200", testutil.Cond(func() (bool, error) {
		code, _ := get("http://" + addr + "/ready")
		return code == http.StatusOK, nil
	}))
	if _, body := get("http://" + addr + "/metrics"); syncedGauge(body) != "1" {
		t.Errorf("ready, but reloader_caches_synced %q", syncedGauge(body))
	}
	testutil.Eventually(t, "web recorded", testutil.Cond(func() (bool, error) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
			return false, err
		}
		return records.Recorded(ctx, cl, d)
	}))
	cm.Data["k"] = "v2"
	testutil.Must(t, cl.Update(ctx, cm))
	testutil.Eventually(t, "web reloaded", testutil.Cond(func() (bool, error) {
		err := cl.Get(ctx, client.ObjectKeyFromObject(d), d)
		return len(d.Spec.Template.Spec.Containers[0].Env) == 1, err
	}))
	if !strings.Contains(out.String(), `"msg":"starting reloader"`) {
		t.Error("no JSON start-up log line")
	}
}

// During a rolling switch with HA, the Lease upstream's leader holds is the one reloader
// contends for: while upstream renews it, reloader writes nothing; once upstream stops, reloader
// takes the Lease over and reloads from then on.
func TestUpstreamLeaderKeepsReloaderFollowing(t *testing.T) {
	t.Parallel() // its own control plane and reloader
	bin := buildReloader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, cl := startCluster(t, ctx, testenv.Options{})
	ns := "reloader"
	testutil.Must(t, cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}, Data: map[string]string{"k": "v1"}}
	d := objects.AutoDeployment(ns, "web", "cfg")
	now := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stakater-reloader-lock"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("upstream-reloader-7c9f"), LeaseDurationSeconds: ptr.To[int32](4),
			AcquireTime: &now, RenewTime: &now}}
	for _, o := range []client.Object{cm, d, lease} {
		testutil.Must(t, cl.Create(ctx, o))
	}
	// Upstream's leader renews every second until told to stop.
	renewCtx, stopRenewing := context.WithCancel(ctx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		for {
			select {
			case <-renewCtx.Done():
				return
			case <-time.After(time.Second):
			}
			var l coordinationv1.Lease
			if err := cl.Get(ctx, client.ObjectKeyFromObject(lease), &l); err == nil && *l.Spec.HolderIdentity == "upstream-reloader-7c9f" {
				l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
				_ = cl.Update(ctx, &l)
			}
		}
	}()
	defer func() { stopRenewing(); <-renewed }()

	out := outputLoggedOnFailure(t)
	addr, err := proc.FreeAddr()
	testutil.Must(t, err)
	// No --leader-election-id: the default must be upstream's Lease.
	p, err := proc.Run(proc.Spec{Bin: bin, Kubeconfig: cluster.Kubeconfig, Prefix: "reloader | ", Out: out,
		Args: []string{"--enable-ha", "--metrics-addr=" + addr, "--leader-election-lease-duration=4s",
			"--leader-election-renew-deadline=3s", "--leader-election-retry-period=500ms"},
		Env: []string{"POD_NAME=reloader-0", "POD_NAMESPACE=" + ns}})
	testutil.Must(t, err)
	t.Cleanup(p.Stop)
	testutil.Eventually(t, "/ready 200", testutil.Cond(func() (bool, error) {
		code, _ := get("http://" + addr + "/ready")
		return code == http.StatusOK, nil
	}))
	cm.Data["k"] = "v2"
	testutil.Must(t, cl.Update(ctx, cm))
	time.Sleep(6 * time.Second) // longer than the Lease's duration: only renewals keep it
	testutil.Must(t, cl.Get(ctx, client.ObjectKeyFromObject(d), d))
	if len(d.Spec.Template.Spec.Containers[0].Env) != 0 || d.Annotations["reloader.dev/source-hashes"] != "" {
		t.Fatalf("reloader acted while upstream held the Lease: env %v, annotations %v", d.Spec.Template.Spec.Containers[0].Env, d.Annotations)
	}

	stopRenewing()
	<-renewed
	testutil.Eventually(t, "reloader holds the Lease", testutil.Cond(func() (bool, error) {
		var l coordinationv1.Lease
		err := cl.Get(ctx, client.ObjectKeyFromObject(lease), &l)
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "reloader-0", nil
	}))
	// The change made under upstream's leadership was not reloaded by reloader; a workload
	// reloader sees for the first time is recorded, not rolled (upstream, as leader, owned
	// that change). The next change rolls it.
	testutil.Eventually(t, "web recorded", testutil.Cond(func() (bool, error) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
			return false, err
		}
		return records.Recorded(ctx, cl, d)
	}))
	cm.Data["k"] = "v3"
	testutil.Must(t, cl.Update(ctx, cm))
	testutil.Eventually(t, "web reloaded by the new leader", testutil.Cond(func() (bool, error) {
		err := cl.Get(ctx, client.ObjectKeyFromObject(d), d)
		return len(d.Spec.Template.Spec.Containers[0].Env) == 1, err
	}))
}
