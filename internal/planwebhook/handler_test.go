package planwebhook

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/app"
	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/localcluster"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil"
)

var cluster *localcluster.Cluster

func TestMain(m *testing.M) {
	var err error
	cluster, err = localcluster.Start(context.Background(), localcluster.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start control plane:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = cluster.Stop()
	os.Exit(code)
}

// warnings collects the warnings the API server returns.
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.seen
	w.seen = nil
	return out
}

// TestWarningsAndRefusalOnARealAPIServer: registered with the API server for ConfigMap writes
// (failurePolicy Ignore), the webhook warns what an update rolls, says nothing of a write that
// rolls nothing, and refuses one that rolls more than the source's max-rolls label allows.
func TestWarningsAndRefusalOnARealAPIServer(t *testing.T) {
	ctx := context.Background()
	ns := "hook"
	scheme, err := app.NewScheme()
	testutil.Must(t, err)
	seen := &warnings{}
	cfg := rest.CopyConfig(cluster.Config)
	cfg.WarningHandler = seen
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	testutil.Must(t, err)

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}, Data: map[string]string{"k": "v1"}}
	testutil.Must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	testutil.Must(t, c.Create(ctx, cm))
	for name, n := range map[string]int32{"a": 2, "b": 3} {
		tpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox",
				EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}}}}
		testutil.Must(t, c.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{
			"reloader.stakater.com/auto": "true",
			reload.RecordAnnotation:      reload.Record{"configmap/cfg": hash.ConfigMap(cm)}.Encode(),
		}}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(n), Selector: &metav1.LabelSelector{MatchLabels: tpl.Labels}, Template: tpl}}))
	}

	o := options.Default()
	o.CoalesceWindow = 0
	o.ReloadRate, o.ReloadBurst = 1, 1
	conf, err := options.Parse(o)
	testutil.Must(t, err)
	hook := NewHTTPHandler(&Handler{Config: cluster.Config, Conf: conf, KeyNamespace: "nowhere"})
	var calls atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		hook.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	url := srv.URL + "/plan"
	ignore, none := admissionv1.Ignore, admissionv1.SideEffectClassNone
	testutil.Must(t, c.Create(ctx, &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "reloader-plan"},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name: "plan.reloader.dev",
			ClientConfig: admissionv1.WebhookClientConfig{URL: &url,
				CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})},
			Rules: []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
				Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps", "secrets"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			FailurePolicy:           &ignore,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
		}},
	}))

	update := func(change func(*corev1.ConfigMap)) error {
		live := &corev1.ConfigMap{}
		testutil.Must(t, c.Get(ctx, client.ObjectKeyFromObject(cm), live))
		change(live)
		return c.Update(ctx, live)
	}
	// The API server may take a moment to call a webhook just registered: label-only writes,
	// which roll nothing, until it does.
	testutil.Eventually(t, "the webhook called", func() error {
		testutil.Must(t, update(func(l *corev1.ConfigMap) {
			l.Labels = map[string]string{MaxRollsLabel: "1", "try": fmt.Sprint(calls.Load())}
		}))
		if calls.Load() == 0 {
			return fmt.Errorf("not called yet")
		}
		return nil
	})
	if w := seen.take(); len(w) > 0 {
		t.Errorf("label-only writes warned %q", w)
	}
	err = update(func(l *corev1.ConfigMap) { l.Data["k"] = "v2" })
	want := "this update will roll 2 workloads, 5 pods, in 1 namespace; paced over 1s, over the 1 its reloader.dev/max-rolls label allows"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("an update rolling 2 workloads over max-rolls 1: %v, want refused with %q", err, want)
	}
	// The limit lifted on its own, then the update admitted with its warning.
	testutil.Must(t, update(func(l *corev1.ConfigMap) { l.Labels = nil }))
	seen.take()
	testutil.Must(t, update(func(l *corev1.ConfigMap) { l.Data["k"] = "v2" }))
	if w := seen.take(); !slices.Contains(w, "this update will roll 2 workloads, 5 pods, in 1 namespace; paced over 1s") {
		t.Errorf("warnings %q", w)
	}
}
