package app_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/app"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/testutil/records"
)

// A reload counted just before the stop (or carried through it) is still there to scrape:
// /metrics answers until the last Events are written, a quiet spell after the last one
// recorded (the Reloaded Event follows the count), because controller-runtime stops its HTTP
// servers after the runnable that writes them. Before, the port closed a few milliseconds
// after the reconcilers, and a count made in those was lost to every scrape.
func TestMetricsAnswerUntilTheLastEventsAreWritten(t *testing.T) {
	ctx := context.Background()
	k8s, err := client.New(restConfig, client.Options{})
	testutil.Must(t, err)
	ns := fmt.Sprintf("stop-metrics-%d", time.Now().UnixNano()%1e6)
	testutil.Must(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Data: map[string]string{"k": "v1"}}
	d := autoDeployment(ns, "web", "web")
	for _, o := range []client.Object{cm, d} {
		testutil.Must(t, k8s.Create(ctx, o))
	}

	opts := options.Default()
	opts.MetricsAddr = freeAddr(t)
	opts.V2HealthAddr = "0"
	opts.CoalesceWindow = 0
	opts.NamespaceSelector = "kubernetes.io/metadata.name=" + ns
	conf, err := options.Parse(opts)
	testutil.Must(t, err)
	mctx, cancel := context.WithCancel(ctx)
	mgr, err := app.New(mctx, restConfig, conf, logr.Discard())
	testutil.Must(t, err)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() { cancel(); <-done })

	key := client.ObjectKeyFromObject(d)
	get := func() (out appsv1.Deployment) {
		_ = k8s.Get(ctx, key, &out)
		return out
	}
	testutil.Eventually(t, "web recorded", testutil.Cond(func() (bool, error) {
		d := get()
		// Outside a cluster, the ledger of first records lives beside the install key.
		return records.Recorded(ctx, k8s, &d)
	}))
	_, before := httpGet(opts.MetricsAddr, "/metrics") // managers in one process share the registry
	testutil.Must(t, k8s.Get(ctx, client.ObjectKeyFromObject(cm), cm))
	cm.Data["k"] = "v2"
	testutil.Must(t, k8s.Update(ctx, cm))
	var seen time.Time
	for {
		if len(get().Spec.Template.Spec.Containers[0].Env) > 0 {
			seen = time.Now() // the write was answered no later; its Event follows it at once
			break
		}
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	var last time.Time
	var body string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		code, b := httpGet(opts.MetricsAddr, "/metrics")
		if code != http.StatusOK {
			break
		}
		last, body = time.Now(), b
	}
	if err := <-done; err != nil {
		t.Errorf("manager: %v", err)
	}
	done <- nil // for the cleanup
	if was, is := executed(t, before), executed(t, body); is != was+1 {
		t.Errorf("the last answer before the port closed counts %v reloads, %v before the change", is, was)
	}
	// The quiet spell is 250 ms from the Event, recorded at most a poll before seen.
	if after := last.Sub(seen); after < 150*time.Millisecond {
		t.Errorf("/metrics answered until %v after the reload, want at least 150ms (the last Events' quiet spell)", after)
	}
}

// executed is the count of successful reloads in a /metrics answer.
func executed(t *testing.T, body string) float64 {
	t.Helper()
	for _, s := range parseExposition(t, body) {
		if s.name == "reloader_reload_executed_total" && s.labels["success"] == "true" {
			v, err := strconv.ParseFloat(s.value, 64)
			testutil.Must(t, err)
			return v
		}
	}
	return 0
}
