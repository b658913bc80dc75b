package planwebhook

import (
	"crypto/tls"
	"fmt"
	"net"

	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/reloader-operator/reloader/internal/app"
	"github.com/reloader-operator/reloader/internal/explain"
	"github.com/reloader-operator/reloader/internal/metricsauth"
	"github.com/reloader-operator/reloader/internal/options"
)

// Serve serves the webhook with --plan-webhook-addr (nothing without): controller-runtime's
// webhook server, whose certificate watcher picks up a rotated tls.crt and tls.key from
// --plan-webhook-cert-dir, on every replica (the server needs no leader), to the API server
// alone (--plan-webhook-client-auth; auth.go). A plan reads the manager's cache only, never
// lists from the API server: kinds read without watch (degraded mode) are left out of it.
// Pass it to app.New.
func Serve(p app.Parts) error {
	if p.Conf.PlanWebhookAddr == "" {
		return nil
	}
	host, port, err := splitAddr(p.Conf.PlanWebhookAddr)
	if err != nil {
		return fmt.Errorf("--plan-webhook-addr: %w", err)
	}
	log := p.Manager.GetLogger().WithName("plan-webhook")
	var auth authenticator
	var tlsOpts []func(*tls.Config)
	switch p.Conf.PlanWebhookClientAuth {
	case options.PlanWebhookClientCert:
		auth = &certAuth{file: p.Conf.PlanWebhookClientCAFile(), names: p.Conf.PlanWebhookClientNames}
		// Asked for, verified by certAuth: a caller without one is refused over HTTP, counted
		// and logged, rather than at the handshake; and a renewed CA needs no restart.
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.ClientAuth = tls.RequestClientCert })
	case options.PlanWebhookClientToken:
		g, err := metricsauth.NewGuard(p.Manager.GetConfig(), p.Manager.GetHTTPClient())
		if err != nil {
			return fmt.Errorf("plan webhook token reviews: %w", err)
		}
		auth = tokenAuth{guard: g}
	default:
		log.Info("the plan webhook answers any caller (--plan-webhook-client-auth=none): what a write of any ConfigMap or Secret rolls is told to whoever reaches its port")
		auth = anyone{}
	}
	srv := webhook.NewServer(webhook.Options{Host: host, Port: port, CertDir: p.Conf.PlanWebhookCertDir, TLSOpts: tlsOpts})
	srv.Register(Path, &gate{auth: auth, next: NewHTTPHandler(NewHandler(p)), refused: newRefusedCounter(crmetrics.Registry), log: log})
	return p.Manager.Add(srv)
}

// NewHandler returns the Handler that plans with the controller New built: its cache, source
// types, kinds, ReloaderConfigs and baselines.
func NewHandler(p app.Parts) *Handler {
	return &Handler{
		Controller: explain.Controller{Reader: p.Manager.GetClient(), Sources: p.Sources, Kinds: p.Kinds, Configs: p.Configs, Caches: p.Caches, Baselines: p.Baselines, Ledger: p.Ledger},
		Conf:       p.Conf,
		Ready:      p.Ready,
		Shard:      p.Shard,
		Log:        p.Manager.GetLogger().WithName("plan-webhook"),
	}
}

func splitAddr(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := net.LookupPort("tcp", p)
	return host, port, err
}
