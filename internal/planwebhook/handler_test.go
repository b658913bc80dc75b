package planwebhook_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/app"
	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/planwebhook"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testenv/clustertest"
	"github.com/reloader-operator/reloader/internal/testenv/proc"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/testutil/objects"
)

var cluster *testenv.Cluster

func TestMain(m *testing.M) {
	// The API server calls webhooks with the credentials an admin gives it (auth_test.go);
	// the directory is left for the process's exit, which clustertest.Main ends in.
	dir, err := os.MkdirTemp("", "planwebhook-apiserver-")
	if err != nil {
		panic(err)
	}
	flags, err := apiServerFlags(dir)
	if err != nil {
		panic(err)
	}
	clustertest.Main(m, testenv.Options{APIServerFlags: flags}, func(c *testenv.Cluster) error {
		cluster = c
		return nil
	})
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

// selfSigned writes a self-signed serving certificate for 127.0.0.1 as tls.crt and tls.key
// into dir, and returns it in PEM, the webhook configuration's caBundle.
func selfSigned(t *testing.T, dir string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	testutil.Must(t, err)
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "reloader-plan-webhook"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	testutil.Must(t, err)
	k, err := x509.MarshalECPrivateKey(key)
	testutil.Must(t, err)
	crt := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	testutil.Must(t, os.WriteFile(filepath.Join(dir, "tls.crt"), crt, 0o600))
	testutil.Must(t, os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: k}), 0o600))
	return crt
}

// deployment uses ConfigMap cm through envFrom, with the auto annotation and the record of
// cm's current content (as reloader writes it on first sight).
func deployment(ns, name string, replicas int32, cm *corev1.ConfigMap) *appsv1.Deployment {
	d := objects.AutoDeployment(ns, name, cm.Name)
	d.Annotations[reload.RecordAnnotation] = reload.Record{"configmap/" + cm.Name: hash.ConfigMap(cm)}.Encode()
	d.Spec.Replicas = ptr.To(replicas)
	return d
}

// served is reloader's manager serving the webhook, registered with the API server for the
// writes of one namespace.
type served struct {
	c    client.Client // the admin, whose warnings land in seen
	seen *warnings
	dir  string // the certificate's directory
	addr string
	hook string // the ValidatingWebhookConfiguration's name
	stop func()
	log  *planLog
}

// planLog keeps the webhook's "planned" debug lines (V(1)), to say on a failure what the
// plans found.
type planLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *planLog) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		if !strings.Contains(prefix, "plan-webhook") {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, args)
		if len(l.lines) > 100 {
			l.lines = l.lines[len(l.lines)-100:]
		}
	}, funcr.Options{Verbosity: 1})
}

// String is the lines logged so far, the last ten.
func (l *planLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines[max(0, len(l.lines)-10):], "\n")
}

// serve runs reloader's manager with --plan-webhook-addr and a self-signed certificate, and
// registers it as the chart does (failurePolicy Ignore; by url here) for namespace ns, which
// it creates.
func serve(t *testing.T, ns string, opts ...func(*options.Options)) *served {
	t.Helper()
	return serveWith(t, ns, nil, opts...)
}

// serveWith is serve with with, when set, also given the manager's parts (before it starts).
func serveWith(t *testing.T, ns string, with app.With, opts ...func(*options.Options)) *served {
	t.Helper()
	ctx := context.Background()
	scheme, err := app.NewScheme()
	testutil.Must(t, err)
	s := &served{seen: &warnings{}, dir: t.TempDir(), hook: "reloader-plan-" + ns, log: &planLog{}}
	cfg := rest.CopyConfig(cluster.Config)
	cfg.WarningHandler = s.seen
	s.c, err = client.New(cfg, client.Options{Scheme: scheme})
	testutil.Must(t, err)
	if err := s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); !apierrors.IsAlreadyExists(err) {
		testutil.Must(t, err)
	}

	caBundle := selfSigned(t, s.dir)
	// The CA of the API server's client certificate, where the chart mounts it.
	testutil.Must(t, os.WriteFile(filepath.Join(s.dir, "client-ca.crt"), apiServerID.clientCA, 0o600))
	s.addr, err = proc.FreeAddr()
	testutil.Must(t, err)
	o := options.Default()
	o.MetricsAddr = "0"
	o.CoalesceWindow = 0
	o.ReloadRate, o.ReloadBurst = 1, 1
	o.PlanWebhookAddr, o.PlanWebhookCertDir = s.addr, s.dir
	o.Namespaces = []string{ns}
	for _, f := range opts {
		f(&o)
	}
	conf, err := options.Parse(o)
	testutil.Must(t, err)
	mctx, cancel := context.WithCancel(ctx)
	withs := []app.With{planwebhook.Serve}
	if with != nil {
		withs = append(withs, with)
	}
	mgr, err := app.New(mctx, cluster.Config, conf, s.log.logger(), withs...)
	testutil.Must(t, err)
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(mctx) }()
	var once sync.Once
	s.stop = func() { once.Do(func() { cancel(); <-stopped }) }
	t.Cleanup(s.stop)

	url := "https://" + s.addr + planwebhook.Path
	ignore, none := admissionv1.Ignore, admissionv1.SideEffectClassNone
	testutil.Must(t, s.c.Create(ctx, &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: s.hook},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name:         "plan.reloader.dev",
			ClientConfig: admissionv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
			Rules: []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
				Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps", "secrets"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			FailurePolicy:           &ignore,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
		}},
	}))
	t.Cleanup(func() {
		_ = s.c.Delete(ctx, &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: s.hook}})
	})
	return s
}

// update changes the live object of obj and writes it.
func update[T client.Object](t *testing.T, c client.Client, obj T, change func(T)) error {
	t.Helper()
	live := obj.DeepCopyObject().(T)
	testutil.Must(t, c.Get(context.Background(), client.ObjectKeyFromObject(obj), live))
	change(live)
	return c.Update(context.Background(), live)
}

// TestServedByTheControllerOnARealAPIServer runs reloader's manager with --plan-webhook-addr
// and a self-signed certificate, registers it with the API server as the chart does
// (failurePolicy Ignore, by url here), and checks what users see: a ConfigMap update used by
// three Deployments is admitted with the warning of what it rolls; a label-only write with
// none; under a max-rolls label of 1 the update is refused, saying why; with reloader stopped
// the same update is admitted.
func TestServedByTheControllerOnARealAPIServer(t *testing.T) {
	ctx := context.Background()
	ns := "hook"
	s := serve(t, ns)
	c, seen := s.c, s.seen
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}, Data: map[string]string{"k": "v1"}}
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe", Labels: map[string]string{planwebhook.MaxRollsLabel: "0"}}, Data: map[string]string{"k": "0"}}
	testutil.Must(t, c.Create(ctx, cm))
	testutil.Must(t, c.Create(ctx, probe))
	for name, n := range map[string]int32{"a": 2, "b": 3, "c": 4} {
		testutil.Must(t, c.Create(ctx, deployment(ns, name, n, cm)))
	}
	testutil.Must(t, c.Create(ctx, deployment(ns, "p", 1, probe)))

	// Until the API server calls the webhook, and reloader's cache has synced, a change of the
	// probe (max-rolls 0, used by one Deployment) is admitted; then it is refused.
	try := 0
	testutil.Eventually(t, "the webhook refuses the probe's change", func() error {
		try++
		err := update(t, c, probe, func(l *corev1.ConfigMap) { l.Data["k"] = fmt.Sprint(try) })
		if err == nil {
			return fmt.Errorf("admitted (warnings %q)", seen.take())
		}
		if want := "this update will roll 1 workload, 1 pod, in 1 namespace, over the 0 its reloader.dev/max-rolls label allows"; !strings.Contains(err.Error(), want) {
			t.Fatalf("refused with %v, want %q", err, want)
		}
		return nil
	})
	seen.take()

	testutil.Must(t, update(t, c, cm, func(l *corev1.ConfigMap) { l.Labels = map[string]string{"team": "shop"} }))
	if w := seen.take(); len(w) > 0 {
		t.Errorf("a label-only write warned %q", w)
	}
	testutil.Must(t, update(t, c, cm, func(l *corev1.ConfigMap) { l.Data["k"] = "v2" }))
	want := "this update will roll 3 workloads, 9 pods, in 1 namespace; paced over 2s"
	if w := seen.take(); len(w) != 1 || w[0] != want {
		t.Errorf("warnings %q, want [%q]", w, want)
	}

	// A server-side dry run gets the same warning, and writes nothing.
	live := &corev1.ConfigMap{}
	testutil.Must(t, c.Get(ctx, client.ObjectKeyFromObject(cm), live))
	live.Data["k"] = "dry"
	testutil.Must(t, c.Update(ctx, live, client.DryRunAll))
	if w := seen.take(); len(w) != 1 || w[0] != want {
		t.Errorf("dry run: warnings %q, want [%q]", w, want)
	}
	testutil.Must(t, c.Get(ctx, client.ObjectKeyFromObject(cm), live))
	if live.Data["k"] != "v2" {
		t.Errorf("the dry run stored %q", live.Data["k"])
	}

	// A limit of 1: the label is set (a write that rolls nothing), then the update refused.
	testutil.Must(t, update(t, c, cm, func(l *corev1.ConfigMap) { l.Labels = map[string]string{planwebhook.MaxRollsLabel: "1"} }))
	err := update(t, c, cm, func(l *corev1.ConfigMap) { l.Data["k"] = "v3" })
	refused := "this update will roll 3 workloads, 9 pods, in 1 namespace; paced over 2s, over the 1 its reloader.dev/max-rolls label allows (`reloader plan` lists them)"
	if err == nil || !strings.Contains(err.Error(), refused) {
		t.Fatalf("an update rolling 3 workloads under max-rolls 1: %v, want refused with %q", err, refused)
	}
	// A write can't lift its own limit: the live object's label counts.
	err = update(t, c, cm, func(l *corev1.ConfigMap) { l.Data["k"] = "v3"; l.Labels = nil })
	if err == nil || !strings.Contains(err.Error(), "over the 1 its") {
		t.Fatalf("an update lifting its own max-rolls: %v, want refused", err)
	}
	seen.take()

	// reloader stopped: failurePolicy Ignore admits the write.
	s.stop()
	if err := update(t, c, cm, func(l *corev1.ConfigMap) { l.Data["k"] = "v3" }); err != nil {
		t.Fatalf("with reloader stopped: %v, want admitted (failurePolicy Ignore)", err)
	}
	testutil.Must(t, c.Get(ctx, client.ObjectKeyFromObject(cm), live))
	if live.Data["k"] != "v3" {
		t.Errorf("stored %q, want v3", live.Data["k"])
	}
}

// TestSecretsAndARenewedCertificate: a Secret's update is planned with the install's hash key
// (the Deployments recorded by reloader itself), and a renewed certificate, with the webhook
// configuration's caBundle changed to its CA alone, is served without a restart.
func TestSecretsAndARenewedCertificate(t *testing.T) {
	ctx := context.Background()
	ns := "hook-secret"
	s := serve(t, ns)
	c, seen := s.c, s.seen
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, Data: map[string][]byte{"password": []byte("one")}}
	testutil.Must(t, c.Create(ctx, sec))
	var deps []*appsv1.Deployment
	for _, name := range []string{"a", "b"} {
		tpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox",
				EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: sec.Name}}}}}}}}
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{"reloader.stakater.com/auto": "true"}},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: tpl.Labels}, Template: tpl}}
		testutil.Must(t, c.Create(ctx, d))
		deps = append(deps, d)
	}
	for _, d := range deps {
		testutil.Eventually(t, d.Name+" recorded by reloader", func() error {
			live := &appsv1.Deployment{}
			testutil.Must(t, c.Get(ctx, client.ObjectKeyFromObject(d), live))
			if _, ok := live.Annotations[reload.RecordAnnotation]; !ok {
				return fmt.Errorf("no record yet")
			}
			return nil
		})
	}
	want := "this update will roll 2 workloads, 2 pods, in 1 namespace; paced over 1s"
	n := 0
	warned := func() error {
		n++
		seen.take()
		testutil.Must(t, update(t, c, sec, func(l *corev1.Secret) { l.Data["password"] = []byte(fmt.Sprint("v", n)) }))
		if w := seen.take(); len(w) != 1 || w[0] != want {
			return fmt.Errorf("warnings %q, want [%q]", w, want)
		}
		return nil
	}
	testutil.Eventually(t, "the Secret's update planned", warned)

	// A renewed certificate of a new CA: the configuration trusts only the new CA, so a
	// warning means the new certificate is served.
	caBundle := selfSigned(t, s.dir)
	hook := &admissionv1.ValidatingWebhookConfiguration{}
	testutil.Must(t, c.Get(ctx, client.ObjectKey{Name: s.hook}, hook))
	hook.Webhooks[0].ClientConfig.CABundle = caBundle
	testutil.Must(t, c.Update(ctx, hook))
	testutil.Eventually(t, "the renewed certificate served", warned)
}

// TestServedByAFollower: with --enable-ha, a replica that is not the leader (another holds the
// Lease) serves the webhook from its own cache all the same.
func TestServedByAFollower(t *testing.T) {
	ctx := context.Background()
	ns := "hook-ha"
	admin, err := client.New(cluster.Config, client.Options{})
	testutil.Must(t, err)
	testutil.Must(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	now := metav1.NewMicroTime(time.Now())
	testutil.Must(t, admin.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: options.DefaultLeaderElectionID},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("another-replica"), LeaseDurationSeconds: ptr.To[int32](3600), AcquireTime: &now, RenewTime: &now}}))
	s := serve(t, ns, func(o *options.Options) {
		o.EnableHA, o.LeaderElectionNamespace, o.LeaderIdentity = true, ns, "follower"
	})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}, Data: map[string]string{"k": "v1"}}
	testutil.Must(t, s.c.Create(ctx, cm))
	testutil.Must(t, s.c.Create(ctx, deployment(ns, "a", 2, cm)))
	want := "this update will roll 1 workload, 2 pods, in 1 namespace"
	n := 0
	testutil.Eventually(t, "the follower's warning", func() error {
		n++
		s.seen.take()
		testutil.Must(t, update(t, s.c, cm, func(l *corev1.ConfigMap) { l.Data["k"] = fmt.Sprint("v", n+1) }))
		if w := s.seen.take(); len(w) != 1 || w[0] != want {
			return fmt.Errorf("warnings %q, want [%q]", w, want)
		}
		return nil
	})
	lease := &coordinationv1.Lease{}
	testutil.Must(t, admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: options.DefaultLeaderElectionID}, lease))
	if h := ptr.Deref(lease.Spec.HolderIdentity, ""); h != "another-replica" {
		t.Errorf("the Lease is held by %q: the webhook was not served by a follower", h)
	}
}

// TestResourceLabelSelector: with --resource-label-selector (and no ReloaderConfig API, so the
// cache keeps no source's labels) a selected source is planned from the cache, and one the
// selector leaves out rolls nothing, as the controller sees them.
func TestResourceLabelSelector(t *testing.T) {
	ctx := context.Background()
	ns := "hook-selector"
	s := serve(t, ns, func(o *options.Options) { o.ResourceLabelSelector = "team=shop" })
	selected := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "selected", Labels: map[string]string{"team": "shop"}}, Data: map[string]string{"k": "v1"}}
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"}, Data: map[string]string{"k": "v1"}}
	testutil.Must(t, s.c.Create(ctx, selected))
	testutil.Must(t, s.c.Create(ctx, other))
	testutil.Must(t, s.c.Create(ctx, deployment(ns, "a", 2, selected)))
	testutil.Must(t, s.c.Create(ctx, deployment(ns, "b", 3, other)))
	want := "this update will roll 1 workload, 2 pods, in 1 namespace"
	n := 0
	testutil.Eventually(t, "the selected source's update planned", func() error {
		n++
		s.seen.take()
		testutil.Must(t, update(t, s.c, selected, func(l *corev1.ConfigMap) { l.Data["k"] = fmt.Sprint("v", n+1) }))
		if w := s.seen.take(); len(w) != 1 || w[0] != want {
			return fmt.Errorf("warnings %q, want [%q]", w, want)
		}
		return nil
	})
	testutil.Must(t, update(t, s.c, other, func(l *corev1.ConfigMap) { l.Data["k"] = "v2" }))
	if w := s.seen.take(); len(w) > 0 {
		t.Errorf("a source the selector leaves out warned %q", w)
	}
}
