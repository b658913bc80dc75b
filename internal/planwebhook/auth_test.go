package planwebhook_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/planwebhook"
	"github.com/reloader-operator/reloader/internal/testenv/clustertest"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// apiServerUser is who the test API server's webhook token authenticates as.
const apiServerUser = "system:kube-apiserver-webhook"

// apiServerID is what the test API server presents to webhooks, from its
// AdmissionConfiguration's kubeconfig (user "*"): a client certificate of clientCA, and a
// token of its --token-auth-file.
var apiServerID struct {
	ca       *issued
	clientCA []byte // PEM
	cert     tls.Certificate
	token    string
}

// issued is a certificate and its key.
type issued struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
	tls  tls.Certificate
}

// issue makes a client certificate for cn signed by ca, or a self-signed CA when ca is nil.
func issue(cn string, ca *issued) (*issued, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, err
	}
	tpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	parent, signer := tpl, key
	if ca == nil {
		tpl.IsCA, tpl.BasicConstraintsValid = true, true
		tpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		parent, signer = ca.cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, parent, &key.PublicKey, signer)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	k, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	out := &issued{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	out.tls, err = tls.X509KeyPair(out.pem, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: k}))
	return out, err
}

// apiServerFlags writes into dir the API server's credentials for webhooks and the files that
// give them to it, as an admin does on a real cluster (docs/plan.md), and returns its flags.
func apiServerFlags(dir string) (map[string]string, error) {
	ca, err := issue("plan-webhook-client-ca", nil)
	if err != nil {
		return nil, err
	}
	client, err := issue("kube-apiserver-webhook-client", ca)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	apiServerID.ca, apiServerID.clientCA, apiServerID.cert, apiServerID.token = ca, ca.pem, client.tls, hex.EncodeToString(b)
	key, err := x509.MarshalECPrivateKey(client.key)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		"client.crt": client.pem,
		"client.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: key}),
		"tokens.csv": []byte(apiServerID.token + "," + apiServerUser + ",uid-webhook\n"),
		"webhook-kubeconfig.yaml": []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
users:
  - name: "*"
    user:
      client-certificate: %s
      client-key: %s
      token: %s
`, filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"), apiServerID.token)),
		"admission.yaml": []byte(fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
  - name: ValidatingAdmissionWebhook
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: WebhookAdmissionConfiguration
      kubeConfigFile: %s
`, filepath.Join(dir, "webhook-kubeconfig.yaml"))),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	return map[string]string{
		"admission-control-config-file": filepath.Join(dir, "admission.yaml"),
		"token-auth-file":               filepath.Join(dir, "tokens.csv"),
	}, nil
}

// caller posts hand-made AdmissionReviews to a served webhook.
type caller struct {
	t    *testing.T
	url  string
	root *x509.CertPool
}

func newCaller(t *testing.T, s *served) caller {
	t.Helper()
	pemCert, err := os.ReadFile(filepath.Join(s.dir, "tls.crt"))
	testutil.Must(t, err)
	root := x509.NewCertPool()
	root.AppendCertsFromPEM(pemCert)
	return caller{t: t, url: "https://" + s.addr + planwebhook.Path, root: root}
}

// reply is a status and a body.
type reply struct {
	code int
	body string
}

// post sends review with cert (none when nil) and token (none when empty).
func (c caller) post(review []byte, cert *tls.Certificate, token string) reply {
	c.t.Helper()
	conf := &tls.Config{RootCAs: c.root, MinVersion: tls.VersionTLS12}
	if cert != nil {
		conf.Certificates = []tls.Certificate{*cert}
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: conf}}
	req, err := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(review))
	testutil.Must(c.t, err)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	testutil.Must(c.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	testutil.Must(c.t, err)
	return reply{resp.StatusCode, string(body)}
}

// guess is the AdmissionReview of an update of live to a guessed password, as anyone could
// write it: the attack is that a warning means the guess is wrong, none that it is right.
func guess(t *testing.T, live *corev1.Secret, password string) []byte {
	t.Helper()
	changed := live.DeepCopy()
	changed.Data = map[string][]byte{"password": []byte(password)}
	oldRaw, err := json.Marshal(live)
	testutil.Must(t, err)
	newRaw, err := json.Marshal(changed)
	testutil.Must(t, err)
	review, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "guess", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Secret"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "secrets"},
			Namespace: live.Namespace, Name: live.Name, Operation: admissionv1.Update,
			Object: runtime.RawExtension{Raw: newRaw}, OldObject: runtime.RawExtension{Raw: oldRaw},
		},
	})
	testutil.Must(t, err)
	return review
}

// answered decodes an allowed answer's warnings.
func answered(t *testing.T, r reply) []string {
	t.Helper()
	code, body := r.code, r.body
	if code != http.StatusOK {
		t.Fatalf("status %d (%s), want 200", code, body)
	}
	var review admissionv1.AdmissionReview
	testutil.Must(t, json.Unmarshal([]byte(body), &review))
	if review.Response == nil || !review.Response.Allowed {
		t.Fatalf("answer %s, want allowed", body)
	}
	return review.Response.Warnings
}

// refused checks that a request got code and nothing of the review's answer, and that it was
// counted under reason.
func refused(t *testing.T, what string, r reply, want int, reason string, before float64) {
	t.Helper()
	code, body := r.code, r.body
	if code != want || strings.Contains(body, "roll") || strings.Contains(body, "uid") {
		t.Errorf("%s: status %d, body %q; want %d and no answer", what, code, body, want)
	}
	if got := refusals(t, reason); got != before+1 {
		t.Errorf("%s: reloader_plan_webhook_refused_total{reason=%q} %v, want %v", what, reason, got, before+1)
	}
}

func refusals(t *testing.T, reason string) float64 {
	t.Helper()
	m, err := clustertest.InProcessMetrics()
	testutil.Must(t, err)
	return m[`reloader_plan_webhook_refused_total{reason="`+reason+`"}`]
}

// secretInUse creates Secret db (password hunter2) in ns, used by a Deployment reloader
// records, and waits until a write through the API server is planned: the webhook is served
// and its cache synced. It returns the live Secret.
func secretInUse(t *testing.T, s *served, ns string) *corev1.Secret {
	t.Helper()
	ctx := context.Background()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, Data: map[string][]byte{"password": []byte("hunter2")}}
	testutil.Must(t, s.c.Create(ctx, sec))
	tpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "a"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox",
			EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: sec.Name}}}}}}}}
	testutil.Must(t, s.c.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a", Annotations: map[string]string{"reloader.stakater.com/auto": "true"}},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: tpl.Labels}, Template: tpl}}))
	// A server-side dry run of a new password: the API server calls the webhook with its
	// credentials, and its answer reaches the writer; nothing is stored.
	want := "this update will roll 1 workload, 1 pod, in 1 namespace"
	testutil.Eventually(t, "a write through the API server planned", func() error {
		s.seen.take()
		live := &corev1.Secret{}
		testutil.Must(t, s.c.Get(ctx, client.ObjectKeyFromObject(sec), live))
		live.Data["password"] = []byte("dry")
		testutil.Must(t, s.c.Update(ctx, live, client.DryRunAll))
		if w := s.seen.take(); len(w) != 1 || !strings.HasPrefix(w[0], want) {
			return fmt.Errorf("warnings %q, want one that starts %q", w, want)
		}
		return nil
	})
	live := &corev1.Secret{}
	testutil.Must(t, s.c.Get(ctx, client.ObjectKeyFromObject(sec), live))
	return live
}

// TestOnlyTheAPIServerIsAnsweredByCertificate: served as the product serves it (the default
// --plan-webhook-client-auth=cert), the webhook answers the API server, which calls it with
// the client certificate of its AdmissionConfiguration; a hand-made AdmissionReview guessing
// a Secret's password gets 401 and no answer from a caller with no certificate or one of
// another CA, counted in reloader_plan_webhook_refused_total; with the API server's
// certificate, the same review is answered (a wrong guess warns, the right one does not).
func TestOnlyTheAPIServerIsAnsweredByCertificate(t *testing.T) {
	ns := "hook-auth-cert"
	s := serve(t, ns)
	live := secretInUse(t, s, ns)
	c := newCaller(t, s)
	stranger, err := issue("kube-apiserver-webhook-client", nil)
	testutil.Must(t, err)

	for _, try := range []struct {
		what string
		cert *tls.Certificate
	}{{"no client certificate", nil}, {"a certificate of another CA", &stranger.tls}} {
		for _, password := range []string{"wrong", "hunter2"} {
			before := refusals(t, "unauthenticated")
			r := c.post(guess(t, live, password), try.cert, apiServerID.token)
			refused(t, try.what+", guessing "+password, r, http.StatusUnauthorized, "unauthenticated", before)
		}
	}

	w := answered(t, c.post(guess(t, live, "wrong"), &apiServerID.cert, ""))
	if len(w) != 1 || !strings.HasPrefix(w[0], "this update will roll 1 workload") {
		t.Errorf("the API server's certificate, a wrong guess: warnings %q, want the plan; the plans logged:\n%s", w, s.log)
	}
	if w := answered(t, c.post(guess(t, live, "hunter2"), &apiServerID.cert, "")); len(w) != 0 {
		t.Errorf("the API server's certificate, the right guess: warnings %q, want none", w)
	}
	// At --log-level=debug the webhook says what each plan found, a plan that rolls nothing too.
	for _, want := range []string{`"rolls"=true`, `"workload"="Deployment/a" "action"="none" "rolls"=false`} {
		if !strings.Contains(s.log.String(), want) {
			t.Errorf("the debug log does not hold %s:\n%s", want, s.log)
		}
	}
}

// TestClientCertificateNames: with --plan-webhook-client-names, a certificate of the client
// CA without one of the names gets 403 and no answer; the API server's is answered.
func TestClientCertificateNames(t *testing.T) {
	ns := "hook-auth-names"
	s := serve(t, ns, func(o *options.Options) { o.PlanWebhookClientNames = []string{"kube-apiserver-webhook-client"} })
	live := secretInUse(t, s, ns)
	c := newCaller(t, s)
	node, err := issue("system:node:node-0", apiServerID.ca)
	testutil.Must(t, err)
	before := refusals(t, "forbidden")
	r := c.post(guess(t, live, "wrong"), &node.tls, "")
	refused(t, "another name of the client CA", r, http.StatusForbidden, "forbidden", before)
	if w := answered(t, c.post(guess(t, live, "wrong"), &apiServerID.cert, "")); len(w) != 1 {
		t.Errorf("the API server's certificate: warnings %q, want the plan; the plans logged:\n%s", w, s.log)
	}
}

// TestOnlyTheAPIServerIsAnsweredByToken: with --plan-webhook-client-auth=token, the API server
// calls the webhook with the token of its AdmissionConfiguration, whose user is allowed post
// on the webhook's path; a caller with no token, one the API server does not know, or a
// ServiceAccount's token whose user is not allowed gets 401 or 403 and no answer; with the
// API server's token the review is answered.
func TestOnlyTheAPIServerIsAnsweredByToken(t *testing.T) {
	ctx := context.Background()
	ns := "hook-auth-token"
	admin, err := client.New(cluster.Config, client.Options{})
	testutil.Must(t, err)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "reloader-plan-webhook-caller-test"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{options.PlanWebhookTokenPath}, Verbs: []string{"post"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: apiServerUser}}}
	for _, o := range []client.Object{role, binding} {
		testutil.Must(t, admin.Create(ctx, o))
		t.Cleanup(func() { _ = admin.Delete(context.Background(), o) })
	}
	s := serve(t, ns, func(o *options.Options) { o.PlanWebhookClientAuth = options.PlanWebhookClientToken })
	live := secretInUse(t, s, ns)
	c := newCaller(t, s)

	// A pod's token: a ServiceAccount the API server authenticates, not allowed the path.
	testutil.Must(t, admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"}}))
	cs, err := kubernetes.NewForConfig(cluster.Config)
	testutil.Must(t, err)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "tenant", &authnv1.TokenRequest{}, metav1.CreateOptions{})
	testutil.Must(t, err)

	for _, try := range []struct {
		what, token, reason string
		code                int
	}{
		{"no token", "", "unauthenticated", http.StatusUnauthorized},
		{"a token the API server does not know", "forged", "unauthenticated", http.StatusUnauthorized},
		{"a tenant's ServiceAccount token", tr.Status.Token, "forbidden", http.StatusForbidden},
	} {
		for _, password := range []string{"wrong", "hunter2"} {
			before := refusals(t, try.reason)
			r := c.post(guess(t, live, password), nil, try.token)
			refused(t, try.what+", guessing "+password, r, try.code, try.reason, before)
		}
	}

	w := answered(t, c.post(guess(t, live, "wrong"), nil, apiServerID.token))
	if len(w) != 1 || !strings.HasPrefix(w[0], "this update will roll 1 workload") {
		t.Errorf("the API server's token, a wrong guess: warnings %q, want the plan; the plans logged:\n%s", w, s.log)
	}
	if w := answered(t, c.post(guess(t, live, "hunter2"), nil, apiServerID.token)); len(w) != 0 {
		t.Errorf("the API server's token, the right guess: warnings %q, want none", w)
	}
}

// TestRenewedClientCA: a new client-ca.crt in the cert dir is read without a restart: the
// old CA's certificate is refused, the new one's answered.
func TestRenewedClientCA(t *testing.T) {
	ns := fmt.Sprintf("hook-auth-renewed-%d", time.Now().UnixNano()%1000000)
	s := serve(t, ns)
	live := secretInUse(t, s, ns)
	c := newCaller(t, s)
	ca, err := issue("renewed-client-ca", nil)
	testutil.Must(t, err)
	renewed, err := issue("kube-apiserver-webhook-client", ca)
	testutil.Must(t, err)
	testutil.Must(t, os.WriteFile(filepath.Join(s.dir, "client-ca.crt"), ca.pem, 0o600))
	before := refusals(t, "unauthenticated")
	refused(t, "the old CA's certificate", c.post(guess(t, live, "wrong"), &apiServerID.cert, ""), http.StatusUnauthorized, "unauthenticated", before)
	if w := answered(t, c.post(guess(t, live, "wrong"), &renewed.tls, "")); len(w) != 1 {
		// What the plan read, to tell the cause when it happens (seen once under load).
		d := &appsv1.Deployment{}
		err := s.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "a"}, d)
		again := answered(t, c.post(guess(t, live, "wrong"), &renewed.tls, ""))
		t.Errorf("the new CA's certificate: warnings %q, want the plan (the Deployment's annotations now %v, %v; asked again: %q); the plans logged:\n%s", w, d.Annotations, err, again, s.log)
	}
}
