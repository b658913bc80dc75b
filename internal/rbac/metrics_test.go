package rbac_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/rbac"
	"github.com/reloader-operator/reloader/internal/testenv/proc"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// With --metrics-secure, reloader granted only the table's rules asks the API server about
// each scraper: no token is 401, a ServiceAccount without the metrics-reader ClusterRole 403,
// one bound to it 200; the probes stay on plain HTTP without credentials.
func TestSecureMetricsOnARealAPIServer(t *testing.T) {
	ctx := context.Background()
	own := namespace(t, nil)
	metricsAddr, healthAddr := freeAddr(t), freeAddr(t)
	o := options.Default()
	fs := pflag.NewFlagSet("reloader", pflag.ContinueOnError)
	o.BindFlags(fs)
	testutil.Must(t, fs.Parse([]string{"--metrics-secure", "--metrics-addr=" + metricsAddr, "--health-addr=" + healthAddr,
		"--ignored-workload-types=deploymentconfigs"}))
	opts, err := options.Load(o, func(k string) string {
		return map[string]string{"POD_NAMESPACE": own, "POD_NAME": "reloader-0", "RELOADER_NAMESPACE": own}[k]
	})
	testutil.Must(t, err)
	refused := runAs(t, opts, rbac.For(opts, rbac.Platform{}), own)

	testutil.Eventually(t, "/ready on the health address", func() error { return expect(t, "http://"+healthAddr+"/ready", "", 200) })
	testutil.Must(t, expect(t, "http://"+healthAddr+"/live", "", 200))

	scraper, stranger := serviceAccountToken(t, own, "scraper"), serviceAccountToken(t, own, "stranger")
	reader := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: own + "-metrics-reader"}, Rules: rbac.MetricsReader()}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: own + "-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: own}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name}}
	testutil.Must(t, admin.Create(ctx, reader))
	testutil.Must(t, admin.Create(ctx, binding))
	t.Cleanup(func() { _ = admin.Delete(ctx, binding); _ = admin.Delete(ctx, reader) })

	metrics := "https://" + metricsAddr + "/metrics"
	testutil.Eventually(t, "/metrics over HTTPS", func() error { return expect(t, metrics, "", http.StatusUnauthorized) })
	testutil.Must(t, expect(t, metrics, "not-a-token", http.StatusUnauthorized))
	testutil.Must(t, expect(t, metrics, stranger, http.StatusForbidden))
	// The binding reaches the authorizer through its informers: a denial is cached 10 s.
	testutil.Eventually(t, "/metrics for the scraper", func() error { return expect(t, metrics, scraper, http.StatusOK) })
	if r := refused(); len(r) > 0 {
		t.Errorf("with the rules of internal/rbac, requests were refused: %v", r)
	}
}

// expect GETs url, with token as a bearer token unless empty, and checks the status (a 200
// must also carry reloader's metrics).
func expect(t *testing.T, url, token string, code int) error {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	testutil.Must(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// The serving certificate is self-signed: scrapers skip its verification, as here.
	c := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != code {
		return fmt.Errorf("GET %s: %d %q, want %d", url, resp.StatusCode, body, code)
	}
	if code == http.StatusOK && strings.HasSuffix(url, "/metrics") && !strings.Contains(string(body), "controller_runtime_") {
		return fmt.Errorf("GET %s: no controller-runtime metrics in %q", url, body)
	}
	return nil
}

func serviceAccountToken(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	testutil.Must(t, admin.Create(ctx, sa))
	req := &authenticationv1.TokenRequest{}
	testutil.Must(t, admin.SubResource("token").Create(ctx, sa, req))
	if req.Status.Token == "" {
		t.Fatalf("no token for %s/%s", ns, name)
	}
	return req.Status.Token
}

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := proc.FreeAddr()
	testutil.Must(t, err)
	return addr
}
