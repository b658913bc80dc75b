package planwebhook

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
)

type refuseAll struct{ code int }

func (r refuseAll) authenticate(*http.Request) (int, string, error) { return r.code, "test", nil }

// TestGateLogsRefusalsRateLimited: a flood of refused callers costs one log line per
// logEvery, saying how many went unlogged, while every refusal is counted; the handler behind
// the gate never runs for them.
func TestGateLogsRefusalsRateLimited(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{})
	reached := false
	reg := prometheus.NewRegistry()
	g := &gate{auth: refuseAll{http.StatusUnauthorized}, log: log, refused: newRefusedCounter(reg),
		next: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true })}
	for range 100 {
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, strings.NewReader("{}")))
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401", rec.Code)
		}
	}
	if reached {
		t.Error("the handler ran for a refused caller")
	}
	families, err := reg.Gather()
	if err != nil || len(families) != 1 || len(families[0].GetMetric()) != 1 ||
		families[0].GetMetric()[0].GetCounter().GetValue() != 100 || families[0].GetMetric()[0].GetLabel()[0].GetValue() != "unauthenticated" {
		t.Errorf("counted %v (%v), want 100 unauthenticated", families, err)
	}
	if len(lines) != 1 || !strings.Contains(lines[0], `"refusedSinceLastLine"=0`) {
		t.Fatalf("log lines %q, want one", lines)
	}
	// The next line, once logEvery has passed, tells of the 99 not logged.
	g.logged = g.logged.Add(-logEvery)
	g.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, Path, nil))
	if len(lines) != 2 || !strings.Contains(lines[1], `"refusedSinceLastLine"=99`) {
		t.Errorf("log lines %q, want a second saying 99 refused since", lines)
	}
}
