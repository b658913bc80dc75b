package app

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/reloader-operator/reloader/internal/ledger"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/sourcecache"
)

// The source cache leaves the ledger's ConfigMaps out (the API server filters them), beside
// --resource-label-selector; Secrets are not filtered by it.
func TestSourceCacheLeavesTheLedgerOut(t *testing.T) {
	sources := []sourcecache.SourceType{sourcecache.ConfigMaps, sourcecache.Secrets(nil)}
	selected := func(conf options.Config) (cm, ledgerCM, secret bool) {
		byObject := cacheOptions(conf, sources, nil, nil, true, nil).ByObject
		var cmSel, secretSel labels.Selector
		for o, b := range byObject {
			switch o.(type) {
			case *corev1.ConfigMap:
				cmSel = b.Label
			case *corev1.Secret:
				secretSel = b.Label
			}
		}
		if cmSel == nil {
			t.Fatal("no label selector on ConfigMaps")
		}
		matches := func(sel labels.Selector, set labels.Set) bool { return sel == nil || sel.Matches(set) }
		return matches(cmSel, labels.Set{"reload": "yes"}), matches(cmSel, labels.Set{"reload": "yes", ledger.Label: "team-a"}),
			matches(secretSel, labels.Set{"reload": "yes", ledger.Label: "team-a"})
	}
	if cm, l, s := selected(options.Config{}); !cm || l || !s {
		t.Errorf("no selector: ConfigMap %v, ledger ConfigMap %v, Secret %v; want true, false, true", cm, l, s)
	}
	sel, err := labels.Parse("reload=yes")
	if err != nil {
		t.Fatal(err)
	}
	if cm, l, _ := selected(options.Config{SourceLabels: sel}); !cm || l {
		t.Errorf("--resource-label-selector reload=yes: ConfigMap %v, ledger ConfigMap %v; want true, false", cm, l)
	}
	other, _ := labels.Parse("reload=no")
	if cm, _, _ := selected(options.Config{SourceLabels: other}); cm {
		t.Error("--resource-label-selector reload=no selects a ConfigMap labelled reload=yes")
	}
}

// /metrics answers uncompressed, even to a scraper that accepts gzip: the handler options
// the metrics server is given turn compression off.
func TestScrapesAreNotCompressed(t *testing.T) {
	var opts promhttp.HandlerOpts
	for _, o := range metricsOptions(options.Config{}, new(atomic.Bool)).HandlerOpts {
		o(&opts)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "scraped_total", Help: "a counter"}))
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, opts).ServeHTTP(rec, req)
	if enc := rec.Header().Get("Content-Encoding"); enc != "" || !strings.Contains(rec.Body.String(), "scraped_total 0") {
		t.Errorf("Content-Encoding %q, body %q; want none and the counter in plain text", enc, rec.Body.String())
	}
}
