package app_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"

	"github.com/reloader-operator/reloader/internal/app"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// logBuffer collects a funcr logger's lines.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBuffer) add(prefix, args string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, prefix+" "+args)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

// waitReady waits for /readyz on addr, the v2 name of /ready.
func waitReady(t *testing.T, addr string) {
	t.Helper()
	testutil.Eventually(t, addr+"/readyz 200", testutil.Cond(func() (bool, error) {
		code, _ := httpGet(addr, "/readyz")
		return code == http.StatusOK, nil
	}))
}

// Upstream v2's chart probes GET :8080/readyz and /healthz: without --health-addr the probes
// are served there (here a free port stands for 8080) and still on the metrics port, under
// both names.
func TestProbesOnUpstreamV2Address(t *testing.T) {
	opts := options.Default()
	opts.MetricsAddr = freeAddr(t)
	opts.V2HealthAddr = freeAddr(t)
	start(t, opts)
	waitReady(t, opts.V2HealthAddr)
	for _, addr := range []string{opts.V2HealthAddr, opts.MetricsAddr} {
		for _, path := range []string{"/readyz", "/healthz", "/ready", "/live"} {
			if code, body := httpGet(addr, path); code != http.StatusOK {
				t.Errorf("%s%s = %d %s", addr, path, code, body)
			}
		}
	}
	if code, _ := httpGet(opts.V2HealthAddr, "/metrics"); code == http.StatusOK {
		t.Error("/metrics served on the probe port")
	}
}

// The v2 port is best effort: taken by another process, reloader starts, says so in a
// warning, and the probes answer on the metrics port.
func TestBusyUpstreamV2AddressIsAWarning(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	testutil.Must(t, err)
	defer busy.Close()
	var logs logBuffer
	opts := options.Default()
	opts.MetricsAddr = freeAddr(t)
	opts.V2HealthAddr = busy.Addr().String()
	startLogged(t, opts, funcr.New(logs.add, funcr.Options{}))
	waitReady(t, opts.MetricsAddr)
	if code, _ := httpGet(opts.MetricsAddr, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz on the metrics port = %d", code)
	}
	if out := logs.String(); !strings.Contains(out, "WARNING: the probes are not served on "+busy.Addr().String()) ||
		!strings.Contains(out, "they stay on the metrics port") {
		t.Errorf("no warning of the busy port in:\n%s", out)
	}
}

// An address the user named must bind: a busy --health-addr stops reloader, as before. A free
// one serves the probes under both names, and only there.
func TestHealthAddrIsRequired(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	testutil.Must(t, err)
	defer busy.Close()
	opts := options.Default()
	opts.MetricsAddr = "0"
	opts.HealthAddr = busy.Addr().String()
	conf, err := options.Parse(opts)
	testutil.Must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := app.New(ctx, restConfig, conf, funcr.New(func(string, string) {}, funcr.Options{})); err == nil || !strings.Contains(err.Error(), "--health-addr "+opts.HealthAddr) {
		t.Errorf("a busy --health-addr: %v", err)
	}

	opts.MetricsAddr = freeAddr(t)
	opts.HealthAddr = freeAddr(t)
	opts.V2HealthAddr = freeAddr(t)
	start(t, opts)
	waitReady(t, opts.HealthAddr)
	for _, path := range []string{"/healthz", "/ready", "/live"} {
		if code, body := httpGet(opts.HealthAddr, path); code != http.StatusOK {
			t.Errorf("--health-addr %s = %d %s", path, code, body)
		}
	}
	if code, _ := httpGet(opts.MetricsAddr, "/ready"); code != http.StatusNotFound {
		t.Errorf("/ready on the metrics port with --health-addr = %d, want 404", code)
	}
	// --health-addr given: the v2 address is not tried.
	if code, _ := httpGet(opts.V2HealthAddr, "/readyz"); code != 0 {
		t.Errorf("/readyz on --v2-health-addr with --health-addr = %d, want nothing listening", code)
	}
}
