package options

import (
	"strings"
	"testing"
)

// The plan webhook answers the API server alone unless told otherwise: cert by default, with
// the client CA beside the serving certificate; an unknown mode, and cert-only flags with
// another mode, are refused.
func TestPlanWebhookClientAuth(t *testing.T) {
	c, err := Parse(parse(t, "--plan-webhook-addr=:9443"))
	if err != nil || c.PlanWebhookClientAuth != PlanWebhookClientCert || c.PlanWebhookClientCAFile() != DefaultPlanWebhookCertDir+"/client-ca.crt" {
		t.Errorf("default: %q, CA %q, %v; want cert, client-ca.crt in the cert dir", c.PlanWebhookClientAuth, c.PlanWebhookClientCAFile(), err)
	}
	c, err = Parse(parse(t, "--plan-webhook-addr=:9443", "--plan-webhook-client-ca=/ca.pem", "--plan-webhook-client-names=a,b"))
	if err != nil || c.PlanWebhookClientCAFile() != "/ca.pem" || strings.Join(c.PlanWebhookClientNames, ",") != "a,b" {
		t.Errorf("CA %q, names %q, %v", c.PlanWebhookClientCAFile(), c.PlanWebhookClientNames, err)
	}
	for _, args := range [][]string{
		{"--plan-webhook-client-auth=mtls"},
		{"--plan-webhook-client-auth=token", "--plan-webhook-client-names=a"},
		{"--plan-webhook-client-auth=none", "--plan-webhook-client-ca=/ca.pem"},
	} {
		if _, err := Parse(parse(t, append([]string{"--plan-webhook-addr=:9443"}, args...)...)); err == nil || !strings.Contains(err.Error(), "--plan-webhook-client") {
			t.Errorf("%v: %v, want refused", args, err)
		}
	}
	if _, err := Parse(parse(t, "--plan-webhook-client-auth=token")); err != nil {
		t.Errorf("token mode without the webhook: %v", err)
	}
}
