package planwebhook

import (
	"fmt"
	"net"

	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/reloader-operator/reloader/internal/app"
	"github.com/reloader-operator/reloader/internal/explain"
)

// Serve serves the webhook with --plan-webhook-addr (nothing without): controller-runtime's
// webhook server, whose certificate watcher picks up a rotated tls.crt and tls.key from
// --plan-webhook-cert-dir, on every replica (the server needs no leader). A plan reads the
// manager's cache only, never lists from the API server: kinds read without watch (degraded
// mode) are left out of it. Pass it to app.New.
func Serve(p app.Parts) error {
	if p.Conf.PlanWebhookAddr == "" {
		return nil
	}
	host, port, err := splitAddr(p.Conf.PlanWebhookAddr)
	if err != nil {
		return fmt.Errorf("--plan-webhook-addr: %w", err)
	}
	srv := webhook.NewServer(webhook.Options{Host: host, Port: port, CertDir: p.Conf.PlanWebhookCertDir})
	h := &Handler{
		Controller: explain.Controller{Reader: p.Manager.GetClient(), Sources: p.Sources, Kinds: p.Kinds, Configs: p.Configs, Caches: p.Caches},
		Conf:       p.Conf,
		Ready:      p.Ready,
		Shard:      p.Shard,
	}
	srv.Register(Path, NewHTTPHandler(h))
	return p.Manager.Add(srv)
}

func splitAddr(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := net.LookupPort("tcp", p)
	return host, port, err
}
