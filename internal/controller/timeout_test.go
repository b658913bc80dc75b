package controller_test

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// hangingWebhook makes the API server hang on every update of a Deployment in ns: its
// validating webhook answers nothing for as long as the API server waits (30 s, the most
// allowed). It returns when each update came.
func hangingWebhook(t *testing.T, ns string) func() []time.Time {
	t.Helper()
	release := make(chan struct{})
	var mu sync.Mutex
	var came []time.Time
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		came = append(came, time.Now())
		mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	url, timeout := srv.URL+"/validate", int32(30)
	fail, none := admissionv1.Fail, admissionv1.SideEffectClassNone
	cfg := &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name:                    "hang.reloader.test",
			ClientConfig:            admissionv1.WebhookClientConfig{URL: &url, CABundle: ca},
			Rules:                   []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Update}, Rule: admissionv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          &timeout,
		}},
	}
	create(t, cfg)
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), cfg) })
	return func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), came...)
	}
}

// A write the API server hangs on (its webhook does not answer) holds the one worker no
// longer than --reconcile-timeout: the reconcile is cancelled after a second and the workload
// is tried again, instead of the worker waiting out the webhook's 30 s. (The API server keeps
// waiting on the webhook for the cancelled request; the client does not.)
func TestAHungWriteEndsAtTheReconcileTimeout(t *testing.T) {
	ns := newNamespace(t)
	came := hangingWebhook(t, ns)
	create(t, configMap(ns, "cfg", map[string]string{"k": "v1"}),
		deployment(ns, "web", map[string]string{auto: "true"}, podSpec("cfg")))
	startReloader(t, ns, func(o *options.Options) { o.ReconcileTimeout = time.Second; o.Workers = 1 })
	testutil.Eventually(t, "the write tried again after the reconcile timeout", func() error {
		c := came()
		if len(c) < 2 {
			return fmt.Errorf("%d writes so far", len(c))
		}
		// The timeout counts from the reconcile's start, and the write comes after its reads
		// (a few hundred ms on a loaded machine): the gap is the timeout less those, plus backoff.
		if gap := c[1].Sub(c[0]); gap < 500*time.Millisecond || gap > 5*time.Second {
			t.Fatalf("second write %v after the first, want about the 1s timeout plus backoff", gap)
		}
		return nil
	})
}
