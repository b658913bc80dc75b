package planwebhook

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/metricsauth"
	"github.com/reloader-operator/reloader/internal/options"
)

// An answer says whether a guessed content of any ConfigMap or Secret is its live content (a
// write that changes nothing rolls nothing, so gets no warning): the webhook answers the API
// server alone, which sends only the writes it admits, in the namespace it names. Any other
// caller is refused before its review is read.

// authenticator returns http.StatusOK for the API server; else the status to refuse with, and
// why.
type authenticator interface {
	authenticate(r *http.Request) (code int, why string, err error)
}

type anyone struct{}

func (anyone) authenticate(*http.Request) (int, string, error) { return http.StatusOK, "", nil }

// tokenAuth asks the API server whether a bearer token's user may post
// options.PlanWebhookTokenPath.
type tokenAuth struct{ guard *metricsauth.Guard }

func (a tokenAuth) authenticate(r *http.Request) (int, string, error) {
	code, err := a.guard.Check(r, "post", options.PlanWebhookTokenPath)
	switch code {
	case http.StatusOK:
		return code, "", nil
	case http.StatusUnauthorized:
		return code, "no bearer token the API server authenticates", nil
	case http.StatusForbidden:
		return code, "the token's user may not post " + options.PlanWebhookTokenPath, nil
	default:
		return code, "the token could not be reviewed", err
	}
}

// certAuth takes a client certificate signed by the CA in file (re-read when the file
// changes), with one of names when there are any.
type certAuth struct {
	file  string
	names []string

	mu    sync.Mutex
	stamp fileStamp
	pool  *x509.CertPool
}

type fileStamp struct {
	mod  time.Time
	size int64
}

func (a *certAuth) authenticate(r *http.Request) (int, string, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return http.StatusUnauthorized, "no client certificate", nil
	}
	pool, err := a.roots()
	if err != nil {
		return http.StatusInternalServerError, "no client CA", err
	}
	leaf := r.TLS.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range r.TLS.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return http.StatusUnauthorized, "client certificate " + leaf.Subject.CommonName + " not verified: " + err.Error(), nil
	}
	if len(a.names) > 0 && !slices.Contains(a.names, leaf.Subject.CommonName) &&
		!slices.ContainsFunc(leaf.DNSNames, func(n string) bool { return slices.Contains(a.names, n) }) {
		return http.StatusForbidden, "client certificate " + leaf.Subject.CommonName + " has none of the names --plan-webhook-client-names allows", nil
	}
	return http.StatusOK, "", nil
}

// roots reads the CA file when it changed since last read (a stat per request); a file that
// can't be read keeps the CA read last, if any.
func (a *certAuth) roots() (*x509.CertPool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	fi, err := os.Stat(a.file)
	if err == nil && a.pool != nil && (fileStamp{fi.ModTime(), fi.Size()}) == a.stamp {
		return a.pool, nil
	}
	var pem []byte
	if err == nil {
		pem, err = os.ReadFile(a.file)
	}
	pool := x509.NewCertPool()
	if err == nil && !pool.AppendCertsFromPEM(bytes.TrimSpace(pem)) {
		err = errors.New("no PEM certificate in it")
	}
	if err != nil {
		if a.pool != nil {
			return a.pool, nil
		}
		return nil, fmt.Errorf("client CA %s: %w", a.file, err)
	}
	a.pool, a.stamp = pool, fileStamp{fi.ModTime(), fi.Size()}
	return pool, nil
}

// logEvery is the most often a refusal is logged: a caller can send thousands a second.
const logEvery = 10 * time.Second

// gate refuses the callers auth does not take, counting them in reloader_plan_webhook_refused_total
// and logging at most one line per logEvery.
type gate struct {
	auth    authenticator
	next    http.Handler
	refused *prometheus.CounterVec
	log     logr.Logger

	mu     sync.Mutex
	logged time.Time
	quiet  int // refusals since the last line
}

// newRefusedCounter registers reloader_plan_webhook_refused_total{reason}.
func newRefusedCounter(reg prometheus.Registerer) *prometheus.CounterVec {
	return metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "reloader_plan_webhook_refused_total",
		Help: "Requests to the plan webhook refused before being read: unauthenticated (no credentials of the API server), forbidden (credentials not allowed) or unavailable (they could not be checked).",
	}, []string{"reason"}))
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	code, why, err := g.auth.authenticate(r)
	if code == http.StatusOK {
		g.next.ServeHTTP(w, r)
		return
	}
	reason := "unavailable"
	switch code {
	case http.StatusUnauthorized:
		reason = "unauthenticated"
	case http.StatusForbidden:
		reason = "forbidden"
	}
	g.refused.WithLabelValues(reason).Inc()
	g.mu.Lock()
	now := time.Now()
	quiet := g.quiet
	logIt := now.Sub(g.logged) >= logEvery
	if logIt {
		g.logged, g.quiet = now, 0
	} else {
		g.quiet++
	}
	g.mu.Unlock()
	if logIt {
		kv := []any{"remote", r.RemoteAddr, "status", code, "why", why, "refusedSinceLastLine", quiet}
		if err != nil {
			g.log.Error(err, "plan webhook caller refused: not the API server", kv...)
		} else {
			g.log.Info("plan webhook caller refused: not the API server", kv...)
		}
	}
	if code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	http.Error(w, http.StatusText(code), code)
}
