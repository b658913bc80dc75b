package options

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
)

// DefaultPlanWebhookCertDir is where the plan webhook's certificate is read from unless
// --plan-webhook-cert-dir says otherwise (the chart mounts its Secret there).
const DefaultPlanWebhookCertDir = "/var/run/reloader/plan-webhook"

// How the plan webhook knows that its caller is the API server (--plan-webhook-client-auth).
// Its answers tell what a write of any ConfigMap or Secret would roll, so they go to the API
// server alone: anyone else could ask about a namespace it can't read.
const (
	// PlanWebhookClientCert: a client certificate signed by --plan-webhook-client-ca, the
	// one the API server is given for webhooks in its AdmissionConfiguration's kubeconfig.
	PlanWebhookClientCert = "cert"
	// PlanWebhookClientToken: a bearer token the API server authenticates (TokenReview) as a
	// user allowed post on the non-resource URL PlanWebhookTokenPath (SubjectAccessReview).
	PlanWebhookClientToken = "token"
	// PlanWebhookClientNone: any caller; only behind a NetworkPolicy that admits the API
	// server alone.
	PlanWebhookClientNone = "none"
)

// PlanWebhookTokenPath is the non-resource URL a caller of the plan webhook with a bearer
// token must be allowed to post (nonResourceURLs in a ClusterRole).
const PlanWebhookTokenPath = "/reloader.dev/plan-webhook"

// PlanWebhookClientCAFile is the client CA's file: --plan-webhook-client-ca, else client-ca.crt
// in --plan-webhook-cert-dir.
func (o Options) PlanWebhookClientCAFile() string {
	if o.PlanWebhookClientCA != "" {
		return o.PlanWebhookClientCA
	}
	return filepath.Join(o.PlanWebhookCertDir, "client-ca.crt")
}

func (o *Options) bindPlanWebhookFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.PlanWebhookAddr, "plan-webhook-addr", o.PlanWebhookAddr, "serve the plan admission webhook (warnings of what a ConfigMap or Secret write rolls; refusal above a source's reloader.dev/max-rolls label) over HTTPS on this address, such as :9443, on every replica; empty: off")
	fs.StringVar(&o.PlanWebhookCertDir, "plan-webhook-cert-dir", o.PlanWebhookCertDir, "directory of the plan webhook's tls.crt and tls.key; a rotated certificate is picked up without a restart")
	fs.StringVar(&o.PlanWebhookClientAuth, "plan-webhook-client-auth", o.PlanWebhookClientAuth, "how the plan webhook knows its caller is the API server, any other caller being refused: cert (a client certificate signed by --plan-webhook-client-ca), token (a bearer token the API server authenticates, whose user may post "+PlanWebhookTokenPath+"), or none (anyone who reaches the port)")
	fs.StringVar(&o.PlanWebhookClientCA, "plan-webhook-client-ca", o.PlanWebhookClientCA, "with --plan-webhook-client-auth=cert, the PEM file of the CA that signs the API server's client certificate, re-read when it changes; empty: client-ca.crt in --plan-webhook-cert-dir")
	fs.StringSliceVar(&o.PlanWebhookClientNames, "plan-webhook-client-names", o.PlanWebhookClientNames, "with --plan-webhook-client-auth=cert, the names (common name or DNS name) the client certificate must carry, one of them; empty: any the CA signed")
}

// checkPlanWebhook checks the plan webhook's flags: an address with a port, not 0, and a
// known client authentication.
func checkPlanWebhook(o Options) []error {
	if o.PlanWebhookAddr == "" {
		return nil
	}
	var errs []error
	if o.PlanWebhookAddr == "0" {
		errs = append(errs, errors.New("--plan-webhook-addr: 0 is not an address; leave it empty to turn the webhook off"))
	} else if err := checkAddr(o.PlanWebhookAddr); err != nil {
		errs = append(errs, fmt.Errorf("--plan-webhook-addr: %w", err))
	}
	if o.PlanWebhookCertDir == "" {
		errs = append(errs, errors.New("--plan-webhook-cert-dir: empty; the webhook needs the directory of its tls.crt and tls.key"))
	}
	switch o.PlanWebhookClientAuth {
	case PlanWebhookClientCert, PlanWebhookClientToken, PlanWebhookClientNone:
	default:
		errs = append(errs, fmt.Errorf("--plan-webhook-client-auth: %q is none of %s", o.PlanWebhookClientAuth,
			strings.Join([]string{PlanWebhookClientCert, PlanWebhookClientToken, PlanWebhookClientNone}, ", ")))
	}
	if o.PlanWebhookClientAuth != PlanWebhookClientCert && (o.PlanWebhookClientCA != "" || len(o.PlanWebhookClientNames) > 0) {
		errs = append(errs, fmt.Errorf("--plan-webhook-client-ca and --plan-webhook-client-names: only with --plan-webhook-client-auth=cert, not %s", o.PlanWebhookClientAuth))
	}
	return errs
}
