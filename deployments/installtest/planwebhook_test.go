package installtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/deployments/render"
	"github.com/reloader-operator/reloader/internal/testenv/proc"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// TestPlanWebhookInstalled installs the chart with planWebhook.enabled (its own certificate)
// on a real API server: every object is accepted; a second render (an upgrade) keeps the
// certificates; reloader, run as the chart's ServiceAccount with the chart's args and the
// Secrets' certificate and client CA, answers an AdmissionReview sent with the client
// certificate the chart generated for the API server, over TLS verified against the caBundle
// for the Service's name, with what the update rolls, with no request refused; refuses the
// same review sent without it (401, no answer); and with the
// chart's configuration registered and nothing serving it (no pods run here), writes are
// admitted: failurePolicy Ignore.
func TestPlanWebhookInstalled(t *testing.T) {
	needCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A namespace of its own for each run's workload and sources (go test -count).
	ns, release, appNS := "rel-planhook", "reloader-planhook", fmt.Sprintf("planhook-app-%d", planhookRuns.Add(1))
	ensureNamespace(t, ctx, ns)
	ensureNamespace(t, ctx, appNS)
	vals := map[string]any{"planWebhook": map[string]any{"enabled": true}}

	crds, err := render.CRDs(chartDir)
	testutil.Must(t, err)
	testutil.Must(t, applyAll(ctx, crds, ""))
	eventually(t, ctx, "the ReloaderConfig API served", func() error { return nil }, func() error {
		return admin.List(ctx, &v1alpha1.ReloaderConfigList{})
	})
	objs, err := render.ChartOnCluster(chartDir, vals, release, ns, cluster.Config)
	testutil.Must(t, err)
	testutil.Must(t, applyAll(ctx, objs, ns))
	vwcName := release + "-reloader-plan-webhook"
	t.Cleanup(func() {
		_ = admin.Delete(context.Background(), &admissionregv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: vwcName}})
	})
	tlsData := func(objs []*unstructured.Unstructured) (map[string][]byte, []byte) {
		s := render.Find(objs, "Secret", vwcName+"-tls")
		v := render.Find(objs, "ValidatingWebhookConfiguration", vwcName)
		if s == nil || v == nil {
			t.Fatalf("no Secret or ValidatingWebhookConfiguration %s", vwcName)
		}
		out := map[string][]byte{}
		for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
			enc, _, _ := unstructured.NestedString(s.Object, "data", k)
			if out[k], err = base64.StdEncoding.DecodeString(enc); err != nil {
				t.Fatal(err)
			}
		}
		hooks, _, _ := unstructured.NestedSlice(v.Object, "webhooks")
		ca, _, _ := unstructured.NestedString(hooks[0].(map[string]any), "clientConfig", "caBundle")
		bundle, err := base64.StdEncoding.DecodeString(ca)
		testutil.Must(t, err)
		return out, bundle
	}
	clientData := func(objs []*unstructured.Unstructured) map[string][]byte {
		s := render.Find(objs, "Secret", vwcName+"-client")
		if s == nil {
			t.Fatalf("no Secret %s-client", vwcName)
		}
		out := map[string][]byte{}
		for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
			enc, _, _ := unstructured.NestedString(s.Object, "data", k)
			if out[k], err = base64.StdEncoding.DecodeString(enc); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	first, bundle := tlsData(objs)
	firstClient := clientData(objs)
	if !bytes.Equal(bundle, first["ca.crt"]) {
		t.Fatal("the caBundle is not the Secret's CA")
	}
	again, err := render.ChartOnCluster(chartDir, vals, release, ns, cluster.Config)
	testutil.Must(t, err)
	if second, bundle2 := tlsData(again); !bytes.Equal(second["tls.crt"], first["tls.crt"]) || !bytes.Equal(second["tls.key"], first["tls.key"]) || !bytes.Equal(bundle2, bundle) {
		t.Error("an upgrade generated a new certificate; want the Secret's kept")
	}
	if second := clientData(again); !bytes.Equal(second["ca.crt"], firstClient["ca.crt"]) || !bytes.Equal(second["tls.crt"], firstClient["tls.crt"]) {
		t.Error("an upgrade generated a new client CA; want the Secret's kept (the API server's kubeconfig holds its certificate)")
	}

	// reloader as the chart's ServiceAccount, serving the webhook with the Secret's certificate.
	deploy, container := reloaderContainer(t, objs)
	sa := deploy.Spec.Template.Spec.ServiceAccountName
	user := serviceAccountUser(ns, sa)
	t.Cleanup(func() { checkAudit(t, user) })
	kubeconfig, err := serviceAccountKubeconfig(ctx, t.TempDir(), ns, sa)
	testutil.Must(t, err)
	certDir := t.TempDir()
	for _, k := range []string{"tls.crt", "tls.key"} {
		testutil.Must(t, os.WriteFile(filepath.Join(certDir, k), first[k], 0o600))
	}
	// As the Deployment's projected volume mounts it.
	testutil.Must(t, os.WriteFile(filepath.Join(certDir, "client-ca.crt"), firstClient["ca.crt"], 0o600))
	addr, err := proc.FreeAddr()
	testutil.Must(t, err)
	pod := fakePod{Name: deploy.Name + "-0", Namespace: ns, UID: "uid-planhook", NodeName: "node-0", ServiceAccount: sa, IP: "127.0.0.1",
		Labels: deploy.Spec.Template.Labels, Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}}
	env, err := containerEnv(container, pod)
	testutil.Must(t, err)
	var args []string
	served := false
	for _, a := range containerArgs(container, env) {
		switch {
		case strings.HasPrefix(a, "--plan-webhook-addr="):
			a, served = "--plan-webhook-addr="+addr, true
		case strings.HasPrefix(a, "--plan-webhook-cert-dir="):
			a = "--plan-webhook-cert-dir=" + certDir // where the kubelet would mount the Secret
		}
		args = append(args, a)
	}
	if !served {
		t.Fatalf("the chart's args %q do not serve the webhook", args)
	}
	p := startReloader(t, pod.Name, args, env, kubeconfig)
	refused := func() error { return refusals(user) }
	testutil.Must(t, p.waitReady(ctx, refused))

	create(t, ctx, sources(appNS)...)
	w := create(t, ctx, newWorkload(Deployment, appNS))[0]
	eventually(t, ctx, describe(w)+" recorded by reloader", refused, func() error {
		if ok, err := recorded(ctx, w); err != nil || ok {
			return err
		}
		return fmt.Errorf("not recorded yet")
	})

	// What the API server sends on an update of the ConfigMap, over TLS as it would check it.
	live := &corev1.ConfigMap{}
	testutil.Must(t, admin.Get(ctx, client.ObjectKey{Namespace: appNS, Name: configName}, live))
	changed := live.DeepCopy()
	changed.Data["greeting"] = "bonjour"
	review := admissionReview(t, live, changed)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(bundle)
	// The API server's client certificate, as an admin gives it in the kubeconfig of its
	// AdmissionConfiguration (docs/plan.md).
	apiServerCert, err := tls.X509KeyPair(firstClient["tls.crt"], firstClient["tls.key"])
	testutil.Must(t, err)
	conf := &tls.Config{RootCAs: roots, ServerName: vwcName + "." + ns + ".svc", MinVersion: tls.VersionTLS12}
	stranger := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: conf.Clone()}}
	conf.Certificates = []tls.Certificate{apiServerCert}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: conf}}
	var got admissionv1.AdmissionReview
	eventually(t, ctx, "the webhook answers", refused, func() error {
		resp, err := hc.Post("https://"+addr+"/plan", "application/json", bytes.NewReader(review))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		got = admissionv1.AdmissionReview{}
		return json.NewDecoder(resp.Body).Decode(&got)
	})
	want := "this update will roll 1 workload, 1 pod, in 1 namespace"
	if got.Response == nil || !got.Response.Allowed || len(got.Response.Warnings) != 1 || !strings.HasPrefix(got.Response.Warnings[0], want) {
		t.Errorf("response %+v, want allowed with the warning %q", got.Response, want)
	}
	// Without the API server's certificate: refused before the review is read.
	resp, err := stranger.Post("https://"+addr+"/plan", "application/json", bytes.NewReader(review))
	testutil.Must(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || strings.Contains(string(body), "roll") {
		t.Errorf("a caller without the API server's certificate: %d %q, want 401 and no answer", resp.StatusCode, body)
	}
	p.stop()

	// The chart's configuration, with nothing behind its Service: writes are admitted.
	if err := admin.Update(ctx, changed); err != nil {
		t.Errorf("an update with the webhook unreachable: %v, want admitted (failurePolicy Ignore)", err)
	}
}

var planhookRuns atomic.Int32

// admissionReview is the request the API server sends for an update of old to obj.
func admissionReview(t *testing.T, old, obj *corev1.ConfigMap) []byte {
	t.Helper()
	raw := func(o runtime.Object) runtime.RawExtension {
		b, err := json.Marshal(o)
		testutil.Must(t, err)
		return runtime.RawExtension{Raw: b}
	}
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("review-1"),
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"},
			Namespace: obj.Namespace, Name: obj.Name, Operation: admissionv1.Update,
			Object: raw(obj), OldObject: raw(old),
		},
	})
	testutil.Must(t, err)
	return b
}
