package options

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"
)

// DefaultPlanWebhookCertDir is where the plan webhook's certificate is read from unless
// --plan-webhook-cert-dir says otherwise (the chart mounts its Secret there).
const DefaultPlanWebhookCertDir = "/var/run/reloader/plan-webhook"

func (o *Options) bindPlanWebhookFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.PlanWebhookAddr, "plan-webhook-addr", o.PlanWebhookAddr, "serve the plan admission webhook (warnings of what a ConfigMap or Secret write rolls; refusal above a source's reloader.dev/max-rolls label) over HTTPS on this address, such as :9443, on every replica; empty: off")
	fs.StringVar(&o.PlanWebhookCertDir, "plan-webhook-cert-dir", o.PlanWebhookCertDir, "directory of the plan webhook's tls.crt and tls.key; a rotated certificate is picked up without a restart")
}

// checkPlanWebhook checks the plan webhook's flags: an address with a port, not 0.
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
	return errs
}
