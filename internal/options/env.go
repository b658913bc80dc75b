package options

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// WebhookURLEnv is the variable --webhook-url is read from when the flag is not given.
const WebhookURLEnv = "WEBHOOK_URL"

// FromEnvironment is ApplyEnv over the process environment.
func (o *Options) FromEnvironment() error { return o.ApplyEnv(os.Getenv) }

// ApplyEnv reads upstream's environment variables where no flag said otherwise. It reports
// every value it can't read, by variable name; such a value is left unset.
func (o *Options) ApplyEnv(getenv func(string) string) error {
	var errs []error
	namespace := func(name string) string {
		ns := strings.TrimSpace(getenv(name))
		if ns == "" {
			return ""
		}
		if err := checkNamespace(ns); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			return ""
		}
		return ns
	}

	if ns := namespace("KUBERNETES_NAMESPACE"); ns != "" && len(o.Namespaces) == 0 {
		o.Namespaces = []string{ns}
	}
	// Upstream counts by namespace only on "enabled" and silently ignores any other word. An
	// install that worked with upstream must start after the swap, so another word is a
	// warning at start-up, not an error.
	switch v := strings.TrimSpace(getenv("METRICS_COUNT_BY_NAMESPACE")); v {
	case "enabled":
		o.MetricsCountByNamespace = true
	case "", "disabled":
		o.MetricsCountByNamespace = false
	default:
		o.Warnings = append(o.Warnings, fmt.Sprintf("METRICS_COUNT_BY_NAMESPACE: %q is neither enabled nor disabled; counting by namespace stays off, as upstream does", v))
	}
	podNamespace := namespace("POD_NAMESPACE")
	// --leader-election-namespace, when given, wins over POD_NAMESPACE.
	if o.LeaderElectionNamespace == "" {
		o.LeaderElectionNamespace = podNamespace
	}
	o.LeaderIdentity = strings.TrimSpace(getenv("POD_NAME"))
	o.ReloaderNamespace = namespace("RELOADER_NAMESPACE")
	if o.ReloaderNamespace == "" {
		o.ReloaderNamespace = podNamespace
	}
	o.ReloaderDeployment = strings.TrimSpace(getenv("RELOADER_DEPLOYMENT_NAME"))
	if d := o.ReloaderDeployment; d != "" {
		if problems := validation.IsDNS1123Subdomain(d); len(problems) > 0 {
			errs = append(errs, fmt.Errorf("RELOADER_DEPLOYMENT_NAME: %q is not a Deployment name: %s", d, strings.Join(problems, "; ")))
			o.ReloaderDeployment = ""
		}
	}

	// WEBHOOK_URL is --webhook-url from the environment, which the chart fills from a
	// Secret: the URL's path is a token, and args are readable by anyone who can read the
	// Deployment. The flag, when given, wins.
	if o.WebhookURL == "" {
		o.WebhookURL = strings.TrimSpace(getenv(WebhookURLEnv))
	}
	o.applyAlertEnv(getenv)
	return errors.Join(errs...)
}
