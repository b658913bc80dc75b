package chart_test

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/reloader-operator/reloader/deployments/render"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/testutil"
)

const (
	certManagerAPI = "cert-manager.io/v1"
	planWebhook    = fullname + "-plan-webhook"
)

// planWebhookConfig returns the rendered ValidatingWebhookConfiguration, typed.
func planWebhookConfig(t *testing.T, objs []*unstructured.Unstructured) *admissionv1.ValidatingWebhookConfiguration {
	t.Helper()
	o := render.Find(objs, "ValidatingWebhookConfiguration", planWebhook)
	if o == nil {
		t.Fatal("no ValidatingWebhookConfiguration " + planWebhook)
	}
	vwc := &admissionv1.ValidatingWebhookConfiguration{}
	testutil.Must(t, k8sruntime.DefaultUnstructuredConverter.FromUnstructured(o.Object, vwc))
	if len(vwc.Webhooks) != 1 {
		t.Fatalf("%d webhooks, want 1", len(vwc.Webhooks))
	}
	return vwc
}

// TestPlanWebhookOffByDefault: no webhook, Service, certificate or flag unless asked for.
func TestPlanWebhookOffByDefault(t *testing.T) {
	for _, apis := range [][]string{nil, {certManagerAPI}} {
		objs, err := render.Chart(chartDir(), nil, release, namespace, apis...)
		testutil.Must(t, err)
		for _, kind := range []string{"ValidatingWebhookConfiguration", "Issuer", "Certificate"} {
			if got := render.OfKind(objs, kind); len(got) > 0 {
				t.Errorf("APIs %v: rendered a %s by default", apis, kind)
			}
		}
		for _, o := range objs {
			if strings.Contains(o.GetName(), "plan-webhook") {
				t.Errorf("APIs %v: rendered %s %s by default", apis, o.GetKind(), o.GetName())
			}
		}
		_, c := container(t, objs)
		if _, ok := argWithPrefix(c, "--plan-webhook"); ok {
			t.Errorf("APIs %v: args %q", apis, c.Args)
		}
	}
}

// checkServing: the pods serve the webhook on the port the Service sends 443 to, with the
// certificate of Secret secret mounted where the flag says, and the configuration calls that
// Service with failurePolicy Ignore, on ConfigMap and Secret writes, outside reloader's
// namespace and kube-system.
func checkServing(t *testing.T, objs []*unstructured.Unstructured, vwc *admissionv1.ValidatingWebhookConfiguration, secret string) {
	t.Helper()
	conf := parseOptions(t, objs)
	if conf.PlanWebhookAddr != ":9443" {
		t.Errorf("--plan-webhook-addr %q, want :9443", conf.PlanWebhookAddr)
	}
	d, c := container(t, objs)
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "plan-webhook" && p.ContainerPort == 9443 }) {
		t.Errorf("container ports %+v, want plan-webhook 9443", c.Ports)
	}
	i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == conf.PlanWebhookCertDir })
	if i < 0 {
		t.Fatalf("nothing mounted at --plan-webhook-cert-dir %s: %+v", conf.PlanWebhookCertDir, c.VolumeMounts)
	}
	j := slices.IndexFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == c.VolumeMounts[i].Name })
	var sources []corev1.VolumeProjection
	if j >= 0 && d.Spec.Template.Spec.Volumes[j].Projected != nil {
		sources = d.Spec.Template.Spec.Volumes[j].Projected.Sources
	}
	// The serving certificate, and the client CA where --plan-webhook-client-ca's default
	// reads it.
	clientCA := []corev1.KeyToPath{{Key: "ca.crt", Path: "client-ca.crt"}}
	if conf.PlanWebhookClientAuth != "cert" || conf.PlanWebhookClientCAFile() != conf.PlanWebhookCertDir+"/client-ca.crt" ||
		len(sources) != 2 || sources[0].Secret == nil || sources[0].Secret.Name != secret || len(sources[0].Secret.Items) != 0 ||
		sources[1].Secret == nil || sources[1].Secret.Name != planWebhook+"-client" || !slices.Equal(sources[1].Secret.Items, clientCA) {
		t.Errorf("--plan-webhook-client-auth %s, CA %s; the cert dir's volume is not Secret %s and the client CA of %s-client: %+v",
			conf.PlanWebhookClientAuth, conf.PlanWebhookClientCAFile(), secret, planWebhook, d.Spec.Template.Spec.Volumes)
	}

	svc := render.Find(objs, "Service", planWebhook)
	if svc == nil {
		t.Fatal("no Service " + planWebhook)
	}
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	if len(ports) != 1 || ports[0].(map[string]any)["targetPort"] != "plan-webhook" || fmt.Sprint(ports[0].(map[string]any)["port"]) != "443" {
		t.Errorf("Service ports %v, want 443 to plan-webhook", ports)
	}

	w := vwc.Webhooks[0]
	ref := w.ClientConfig.Service
	if ref == nil || ref.Name != planWebhook || ref.Namespace != namespace || ref.Path == nil || *ref.Path != "/plan" || ref.Port == nil || *ref.Port != 443 {
		t.Errorf("clientConfig.service %+v", ref)
	}
	if w.FailurePolicy == nil || *w.FailurePolicy != admissionv1.Ignore {
		t.Errorf("failurePolicy %v, want Ignore", w.FailurePolicy)
	}
	if w.SideEffects == nil || *w.SideEffects != admissionv1.SideEffectClassNone {
		t.Errorf("sideEffects %v, want None", w.SideEffects)
	}
	if w.TimeoutSeconds == nil || *w.TimeoutSeconds != 5 {
		t.Errorf("timeoutSeconds %v, want 5", w.TimeoutSeconds)
	}
	if len(w.Rules) != 1 || !slices.Equal(w.Rules[0].Resources, []string{"configmaps", "secrets"}) ||
		!slices.Equal(w.Rules[0].Operations, []admissionv1.OperationType{admissionv1.Create, admissionv1.Update}) {
		t.Errorf("rules %+v", w.Rules)
	}
	sel := w.NamespaceSelector
	if sel == nil || len(sel.MatchExpressions) != 1 || sel.MatchExpressions[0].Key != "kubernetes.io/metadata.name" ||
		sel.MatchExpressions[0].Operator != "NotIn" || !slices.Equal(sel.MatchExpressions[0].Values, []string{namespace, "kube-system"}) {
		t.Errorf("namespaceSelector %+v, want reloader's namespace and kube-system left out", sel)
	}
}

// TestPlanWebhookSelfManagedCertificate: without cert-manager, a CA and a serving certificate
// for the Service's DNS names are generated into a Secret, and the CA is the caBundle.
func TestPlanWebhookSelfManagedCertificate(t *testing.T) {
	// certManager.enabled without cert-manager's API served: the chart's own certificate.
	for _, doc := range []string{`planWebhook: {enabled: true}`, `planWebhook: {enabled: true, certManager: {enabled: true}}`} {
		objs := renderChart(t, doc)
		if len(render.OfKind(objs, "Certificate")) > 0 || len(render.OfKind(objs, "Issuer")) > 0 {
			t.Errorf("%s: cert-manager objects rendered on a cluster without its API", doc)
		}
		secret := render.Find(objs, "Secret", planWebhook+"-tls")
		if secret == nil {
			t.Fatalf("%s: no Secret %s-tls", doc, planWebhook)
		}
		data := map[string][]byte{}
		for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
			v, _, _ := unstructured.NestedString(secret.Object, "data", k)
			b, err := base64.StdEncoding.DecodeString(v)
			if err != nil || len(b) == 0 {
				t.Fatalf("%s: Secret key %s: %v", doc, k, err)
			}
			data[k] = b
		}
		vwc := planWebhookConfig(t, objs)
		if got := vwc.Webhooks[0].ClientConfig.CABundle; string(got) != string(data["ca.crt"]) {
			t.Errorf("%s: caBundle is not the Secret's ca.crt", doc)
		}
		if _, ok := vwc.Annotations["cert-manager.io/inject-ca-from"]; ok {
			t.Errorf("%s: cainjector annotation without cert-manager", doc)
		}
		// The API server checks the serving certificate against the caBundle for the name
		// of the Service it calls.
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(data["ca.crt"]) {
			t.Fatalf("%s: ca.crt is no PEM certificate", doc)
		}
		block, _ := pem.Decode(data["tls.crt"])
		if block == nil {
			t.Fatalf("%s: tls.crt is no PEM", doc)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		testutil.Must(t, err)
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: planWebhook + "." + namespace + ".svc"}); err != nil {
			t.Errorf("%s: the serving certificate does not verify for the Service: %v", doc, err)
		}
		checkServing(t, objs, vwc, planWebhook+"-tls")
	}
}

// TestPlanWebhookCertManager: with cert-manager's API served, a self-signed Issuer and a
// Certificate write the Secret the pods mount, and cainjector fills the caBundle.
func TestPlanWebhookCertManager(t *testing.T) {
	objs, err := render.Chart(chartDir(), values(t, `planWebhook: {enabled: true, certManager: {enabled: true}}`), release, namespace, certManagerAPI)
	testutil.Must(t, err)
	if render.Find(objs, "Secret", planWebhook+"-tls") != nil {
		t.Error("the chart writes the Secret cert-manager owns")
	}
	issuer := render.Find(objs, "Issuer", planWebhook+"-selfsigned")
	if issuer == nil {
		t.Fatal("no Issuer")
	}
	if _, ok, _ := unstructured.NestedMap(issuer.Object, "spec", "selfSigned"); !ok {
		t.Errorf("Issuer %v, want selfSigned", issuer.Object["spec"])
	}
	cert := render.Find(objs, "Certificate", planWebhook)
	if cert == nil {
		t.Fatal("no Certificate")
	}
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	issuerRef, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
	if secretName != planWebhook+"-tls" || !slices.Contains(dns, planWebhook+"."+namespace+".svc") || issuerRef != issuer.GetName() {
		t.Errorf("Certificate spec %v", cert.Object["spec"])
	}
	vwc := planWebhookConfig(t, objs)
	if got := vwc.Annotations["cert-manager.io/inject-ca-from"]; got != namespace+"/"+cert.GetName() {
		t.Errorf("inject-ca-from %q, want %s/%s", got, namespace, cert.GetName())
	}
	if len(vwc.Webhooks[0].ClientConfig.CABundle) > 0 {
		t.Error("a caBundle rendered beside cainjector's")
	}
	checkServing(t, objs, vwc, secretName)
}

// TestPlanWebhookOptions: the object selector, updates only, more namespaces left out, the
// timeout; and the schema refuses what it does not know.
func TestPlanWebhookOptions(t *testing.T) {
	objs := renderChart(t, `planWebhook: {enabled: true, onCreate: false, timeoutSeconds: 3, excludeNamespaces: [monitoring],
  objectSelector: {matchLabels: {reloader.dev/plan: "true"}}}`)
	w := planWebhookConfig(t, objs).Webhooks[0]
	if !slices.Equal(w.Rules[0].Operations, []admissionv1.OperationType{admissionv1.Update}) {
		t.Errorf("operations %v, want UPDATE only", w.Rules[0].Operations)
	}
	if w.ObjectSelector == nil || w.ObjectSelector.MatchLabels["reloader.dev/plan"] != "true" {
		t.Errorf("objectSelector %+v", w.ObjectSelector)
	}
	if *w.TimeoutSeconds != 3 {
		t.Errorf("timeoutSeconds %d, want 3", *w.TimeoutSeconds)
	}
	if v := w.NamespaceSelector.MatchExpressions[0].Values; !slices.Equal(v, []string{namespace, "kube-system", "monitoring"}) {
		t.Errorf("namespaces left out %v", v)
	}
	for _, tt := range []struct{ values, mention string }{
		{`planWebhook: {enabeld: true}`, "enabeld"},
		{`planWebhook: {timeoutSeconds: 60}`, "timeoutSeconds"},
		{`planWebhook: {certManager: {issuer: x}}`, "issuer"},
	} {
		_, err := renderValues(values(t, tt.values))
		if err == nil || !strings.Contains(err.Error(), tt.mention) {
			t.Errorf("%s: %v, want a schema error naming %s", tt.values, err, tt.mention)
		}
	}
}

// secretData decodes the data of Secret name, nil when not rendered.
func secretData(t *testing.T, objs []*unstructured.Unstructured, name string) map[string][]byte {
	t.Helper()
	s := render.Find(objs, "Secret", name)
	if s == nil {
		return nil
	}
	enc, _, _ := unstructured.NestedStringMap(s.Object, "data")
	out := map[string][]byte{}
	for k, v := range enc {
		b, err := base64.StdEncoding.DecodeString(v)
		testutil.Must(t, err)
		out[k] = b
	}
	return out
}

// TestPlanWebhookClientAuth: by default the webhook takes the API server's client certificate,
// and the chart generates a CA and a client certificate for it (one the CA verifies for client
// authentication), the CA mounted as the webhook's client CA; a caBundle of the admin's and
// allowed names are passed on; token mode ships a ServiceAccount and its token for the API
// server, allowed post on the webhook's path, and lets reloader review tokens; the schema
// refuses a mode it does not know.
func TestPlanWebhookClientAuth(t *testing.T) {
	objs := renderChart(t, `planWebhook: {enabled: true}`)
	client := secretData(t, objs, planWebhook+"-client")
	roots := x509.NewCertPool()
	block, _ := pem.Decode(client["tls.crt"])
	if !roots.AppendCertsFromPEM(client["ca.crt"]) || block == nil {
		t.Fatalf("Secret %s-client: no PEM ca.crt and tls.crt: %v", planWebhook, client)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	testutil.Must(t, err)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the API server's client certificate: %v", err)
	}
	if len(client["tls.key"]) == 0 {
		t.Error("no tls.key for the API server's client certificate")
	}
	if conf := parseOptions(t, objs); conf.PlanWebhookClientAuth != "cert" || len(conf.PlanWebhookClientNames) != 0 {
		t.Errorf("--plan-webhook-client-auth %q, names %q; want cert, any name", conf.PlanWebhookClientAuth, conf.PlanWebhookClientNames)
	}
	if render.Find(objs, "ServiceAccount", planWebhook+"-caller") != nil {
		t.Error("a caller ServiceAccount in cert mode")
	}

	bundle := string(client["ca.crt"])
	objs = renderChart(t, fmt.Sprintf("planWebhook: {enabled: true, clientAuth: {caBundle: %q, allowedNames: [front-proxy-client, kube-apiserver]}}", bundle))
	if got := secretData(t, objs, planWebhook+"-client"); len(got) != 1 || string(got["ca.crt"]) != bundle {
		t.Errorf("with a caBundle, Secret %s-client holds %v, want its ca.crt alone", planWebhook, got)
	}
	if conf := parseOptions(t, objs); !slices.Equal(conf.PlanWebhookClientNames, []string{"front-proxy-client", "kube-apiserver"}) {
		t.Errorf("--plan-webhook-client-names %q", conf.PlanWebhookClientNames)
	}

	objs = renderChart(t, `planWebhook: {enabled: true, clientAuth: {mode: token}}`)
	if conf := parseOptions(t, objs); conf.PlanWebhookClientAuth != "token" {
		t.Errorf("--plan-webhook-client-auth %q, want token", conf.PlanWebhookClientAuth)
	}
	if secretData(t, objs, planWebhook+"-client") != nil {
		t.Error("a client CA in token mode")
	}
	token := render.Find(objs, "Secret", planWebhook+"-caller")
	if render.Find(objs, "ServiceAccount", planWebhook+"-caller") == nil || token == nil ||
		token.Object["type"] != "kubernetes.io/service-account-token" || token.GetAnnotations()["kubernetes.io/service-account.name"] != planWebhook+"-caller" {
		t.Fatalf("token mode: no ServiceAccount %s-caller with its token Secret", planWebhook)
	}
	var role rbacv1.ClusterRole
	var binding rbacv1.ClusterRoleBinding
	fromUnstructured(t, render.Find(objs, "ClusterRole", planWebhook+"-caller"), &role)
	fromUnstructured(t, render.Find(objs, "ClusterRoleBinding", planWebhook+"-caller"), &binding)
	if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].NonResourceURLs, []string{options.PlanWebhookTokenPath}) || !slices.Equal(role.Rules[0].Verbs, []string{"post"}) {
		t.Errorf("caller ClusterRole rules %+v, want post on %s", role.Rules, options.PlanWebhookTokenPath)
	}
	if binding.RoleRef.Name != role.Name || !slices.Equal(binding.Subjects, []rbacv1.Subject{{Kind: "ServiceAccount", Name: planWebhook + "-caller", Namespace: namespace}}) {
		t.Errorf("caller ClusterRoleBinding %+v", binding)
	}

	objs = renderChart(t, `planWebhook: {enabled: true, clientAuth: {mode: none}}`)
	if conf := parseOptions(t, objs); conf.PlanWebhookClientAuth != "none" || secretData(t, objs, planWebhook+"-client") != nil {
		t.Errorf("mode none: --plan-webhook-client-auth %q, or a client CA rendered", conf.PlanWebhookClientAuth)
	}

	if _, err := renderValues(values(t, `planWebhook: {clientAuth: {mode: mtls}}`)); err == nil || !strings.Contains(err.Error(), "mode") {
		t.Errorf("clientAuth.mode mtls: %v, want a schema error", err)
	}
}

// TestPlanWebhookNetworkPolicy: the webhook port admits planWebhook.networkPolicyFrom's peers
// when given, else every peer.
func TestPlanWebhookNetworkPolicy(t *testing.T) {
	for _, tt := range []struct {
		values string
		from   []networkingv1.NetworkPolicyPeer
	}{
		{`{planWebhook: {enabled: true}, reloader: {netpol: {enabled: true}}}`, nil},
		{`{planWebhook: {enabled: true, networkPolicyFrom: [{ipBlock: {cidr: 10.0.0.10/32}}]}, reloader: {netpol: {enabled: true}}}`,
			[]networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.10/32"}}}},
	} {
		objs := renderChart(t, tt.values)
		var np networkingv1.NetworkPolicy
		fromUnstructured(t, render.Find(objs, "NetworkPolicy", fullname), &np)
		i := slices.IndexFunc(np.Spec.Ingress, func(r networkingv1.NetworkPolicyIngressRule) bool {
			return len(r.Ports) == 1 && r.Ports[0].Port != nil && r.Ports[0].Port.String() == "plan-webhook"
		})
		if i < 0 {
			t.Fatalf("%s: no ingress rule for the plan-webhook port: %+v", tt.values, np.Spec.Ingress)
		}
		if got := np.Spec.Ingress[i].From; fmt.Sprint(got) != fmt.Sprint(tt.from) {
			t.Errorf("%s: the webhook port admits %+v, want %+v", tt.values, got, tt.from)
		}
	}
}
