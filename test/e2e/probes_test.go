package e2e

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testenv/proc"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// Upstream v2's chart probes GET :8080/readyz and :8080/healthz, and a bare reloader (no
// health flag) dropped into it must answer there once ready. Port 8080 is best effort: when
// another process holds it (another reloader of this suite, upstream v2 in a load test),
// reloader starts all the same, warns, and answers on the metrics port; the test then checks
// that path, so it means something on a busy machine too.
func TestBareBinaryAnswersUpstreamV2Probes(t *testing.T) {
	bin := buildReloader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, _ := startCluster(t, ctx, testenv.Options{})
	out := outputLoggedOnFailure(t)
	metrics, err := proc.FreeAddr()
	testutil.Must(t, err)
	if l, err := net.Listen("tcp", ":8080"); err != nil {
		t.Logf(":8080 is busy before the start (%v): expecting the warning", err)
	} else {
		_ = l.Close()
	}
	// --metrics-addr only because :9090 may be another reloader's; no health flag.
	p, err := proc.Run(proc.Spec{Bin: bin, Kubeconfig: cluster.Kubeconfig, Prefix: "reloader | ", Out: out,
		Args: []string{"--metrics-addr=" + metrics}})
	testutil.Must(t, err)
	t.Cleanup(p.Stop)

	testutil.Eventually(t, "/ready on the metrics port", testutil.Cond(func() (bool, error) {
		code, _ := get("http://" + metrics + "/ready")
		return code == http.StatusOK, nil
	}))
	logs := out.String()
	served := strings.Contains(logs, "serving the probes for upstream v2's chart too")
	warned := strings.Contains(logs, "WARNING: the probes are not served on :8080")
	probes := "http://127.0.0.1:8080"
	switch {
	case served && !warned:
		t.Log("reloader took :8080")
	case warned && !served:
		t.Log(":8080 was busy: checking the probes on the metrics port")
		probes = "http://" + metrics
	default:
		t.Fatalf("reloader neither served :8080 nor warned that it could not (served %v, warned %v)", served, warned)
	}
	for _, path := range []string{"/readyz", "/healthz", "/ready", "/live"} {
		if code, body := get(probes + path); code != http.StatusOK || body != "ok" {
			t.Errorf("GET %s%s = %d %q, want 200 ok", probes, path, code, body)
		}
	}
	// The metrics port keeps the names upstream 2.x's chart and this project's chart probe.
	for _, path := range []string{"/ready", "/live", "/readyz", "/healthz"} {
		if code, _ := get("http://" + metrics + path); code != http.StatusOK {
			t.Errorf("GET %s%s on the metrics port = %d", metrics, path, code)
		}
	}
}
