package app_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/reloader-operator/reloader/internal/app"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testenv/clustertest"
	"github.com/reloader-operator/reloader/internal/testenv/proc"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/testutil/records"
)

// This package's reloaders watch every namespace, so it has a control plane of its own.
var restConfig *rest.Config

func TestMain(m *testing.M) {
	clustertest.Main(m, testenv.Options{}, func(c *testenv.Cluster) error {
		restConfig = c.Config
		return nil
	})
}

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := proc.FreeAddr()
	testutil.Must(t, err)
	return addr
}

// start runs a manager until the test ends and waits for its caches.
func start(t *testing.T, opts options.Options) manager.Manager {
	t.Helper()
	return startLogged(t, opts, logr.Discard())
}

// startLogged is start with a logger. In-process managers leave upstream v2's probe port
// alone unless a test names another address: many run at once on one machine.
func startLogged(t *testing.T, opts options.Options, logger logr.Logger) manager.Manager {
	t.Helper()
	if opts.V2HealthAddr == options.DefaultV2HealthAddr {
		opts.V2HealthAddr = "0"
	}
	conf, err := options.Parse(opts)
	testutil.Must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := app.New(ctx, restConfig, conf, logger)
	testutil.Must(t, err)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		t.Fatal("cache did not sync")
	}
	return mgr
}

// autoDeployment is Deployment name of ns, annotated auto, its container's environment taken
// from ConfigMap cm.
func autoDeployment(ns, name, cm string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{"reloader.stakater.com/auto": "true"}},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox",
				EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}}}}},
		}},
	}
}

func httpGet(addr, path string) (int, string) {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestMetricsPortServesLiveReadyAndMetrics(t *testing.T) {
	opts := options.Default()
	opts.MetricsAddr = freeAddr(t)
	start(t, opts)
	testutil.Eventually(t, "/ready 200", testutil.Cond(func() (bool, error) {
		code, _ := httpGet(opts.MetricsAddr, "/ready")
		return code == http.StatusOK, nil
	}))
	for _, path := range []string{"/live", "/healthz", "/readyz"} {
		if code, body := httpGet(opts.MetricsAddr, path); code != http.StatusOK {
			t.Errorf("%s = %d %s", path, code, body)
		}
	}
	// Controllers register their series as they start, a moment after the caches sync
	// (ready): seen on a busy machine.
	for _, name := range []string{`reloader_reload_executed_total{success="true"}`, "controller_runtime_reconcile_total", "rest_client_requests_total"} {
		testutil.Eventually(t, "/metrics with "+name, testutil.Cond(func() (bool, error) {
			code, body := httpGet(opts.MetricsAddr, "/metrics")
			return code == http.StatusOK && strings.Contains(body, name), nil
		}))
	}
	if code, _ := httpGet(opts.MetricsAddr, "/debug/pprof/"); code == http.StatusOK {
		t.Error("pprof served on the metrics port")
	}
}

func TestPprofOnlyWhenEnabledAndOnItsOwnAddress(t *testing.T) {
	opts := options.Default()
	opts.MetricsAddr = "0"
	opts.EnablePprof = true
	opts.PprofAddr = freeAddr(t)
	start(t, opts)
	testutil.Eventually(t, "pprof index", testutil.Cond(func() (bool, error) {
		code, _ := httpGet(opts.PprofAddr, "/debug/pprof/")
		return code == http.StatusOK, nil
	}))
	if code, _ := httpGet(opts.PprofAddr, "/debug/pprof/heap?debug=1"); code != http.StatusOK {
		t.Errorf("/debug/pprof/heap = %d, want 200", code)
	}
	// The command line holds --webhook-url, whose path is a token.
	if code, body := httpGet(opts.PprofAddr, "/debug/pprof/cmdline"); code != http.StatusNotFound {
		t.Errorf("/debug/pprof/cmdline = %d %q, want 404", code, body)
	}
}

// --namespaces-to-ignore and --resource-label-selector are applied by the API server: what
// they leave out is not in reloader's cache at all, and never reloads anything.
func TestFiltersShrinkTheCache(t *testing.T) {
	ctx := context.Background()
	k8s, err := client.New(restConfig, client.Options{})
	testutil.Must(t, err)
	keep, skip := "filters-keep", "filters-skip"
	type pair struct {
		ns, name string
		labelled bool
	}
	pairs := []pair{{keep, "labelled", true}, {keep, "plain", false}, {skip, "labelled", true}}
	for _, ns := range []string{keep, skip} {
		testutil.Must(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	for _, p := range pairs {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: p.name}, Data: map[string]string{"k": "v1"}}
		if p.labelled {
			cm.Labels = map[string]string{"reload": "yes"}
		}
		for _, o := range []client.Object{cm, autoDeployment(p.ns, p.name, p.name)} {
			testutil.Must(t, k8s.Create(ctx, o))
		}
	}

	opts := options.Default()
	opts.MetricsAddr = freeAddr(t) // for the wait before the negative check
	opts.CoalesceWindow = 0
	opts.NamespacesToIgnore = []string{skip}
	opts.ResourceLabelSelector = "reload:yes" // upstream's legacy form
	mgr := start(t, opts)

	var cached corev1.ConfigMapList
	testutil.Must(t, mgr.GetCache().List(ctx, &cached))
	var names []string
	for _, cm := range cached.Items {
		names = append(names, cm.Namespace+"/"+cm.Name)
	}
	if len(names) != 1 || names[0] != keep+"/labelled" {
		t.Errorf("cached ConfigMaps = %v, want only %s/labelled", names, keep)
	}
	// No ReloaderConfig API here: nothing reads a source's labels, and the cache keeps none.
	for _, cm := range cached.Items {
		if cm.Labels != nil {
			t.Errorf("cached ConfigMap %s/%s keeps its labels %v", cm.Namespace, cm.Name, cm.Labels)
		}
	}
	var deployments appsv1.DeploymentList
	testutil.Must(t, mgr.GetCache().List(ctx, &deployments))
	for _, d := range deployments.Items {
		if d.Namespace == skip {
			t.Errorf("Deployment %s/%s of an ignored namespace is cached", d.Namespace, d.Name)
		}
	}

	testutil.Eventually(t, "keep/labelled recorded", testutil.Cond(func() (bool, error) {
		var d appsv1.Deployment
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: keep, Name: "labelled"}, &d); err != nil {
			return false, err
		}
		// Outside a cluster, the ledger of first records lives beside the install key.
		return records.Recorded(ctx, k8s, &d)
	}))
	for _, p := range pairs {
		var cm corev1.ConfigMap
		testutil.Must(t, k8s.Get(ctx, client.ObjectKey{Namespace: p.ns, Name: p.name}, &cm))
		cm.Data["k"] = "v2"
		testutil.Must(t, k8s.Update(ctx, &cm))
	}
	envCount := func(ns, name string) int {
		var d appsv1.Deployment
		_ = k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d)
		return len(d.Spec.Template.Spec.Containers[0].Env)
	}
	testutil.Eventually(t, "keep/labelled reloaded", testutil.Cond(func() (bool, error) { return envCount(keep, "labelled") == 1, nil }))
	testutil.Settle(t, "reloader", testutil.QuietMetrics("http://"+opts.MetricsAddr+"/metrics"))
	if envCount(keep, "plain") != 0 || envCount(skip, "labelled") != 0 {
		t.Errorf("filtered out workloads reloaded: keep/plain %d, skip/labelled %d", envCount(keep, "plain"), envCount(skip, "labelled"))
	}
}
