package options

import (
	"strings"
	"testing"
)

// Upstream v2's --alert-* flags: each means what it means in v2, and wins over its ALERT_*
// variable; without it the variable applies.
func TestAlertFlags(t *testing.T) {
	const hook, other = "https://chat.example/T0/s3cr3t", "https://env.example/T1/other"
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
		want Alert
	}{
		{"none", nil, nil, Alert{Sink: "raw"}},
		{"every flag", []string{"--alert-on-reload", "--alert-sink=Teams", "--alert-webhook-url=" + hook,
			"--alert-proxy=http://proxy.example:3128", "--alert-additional-info=cluster prod-eu", "--alert-structured"}, nil,
			Alert{Enabled: true, Sink: "teams", WebhookURL: hook, Proxy: "http://proxy.example:3128", AdditionalInfo: "cluster prod-eu", Structured: true}},
		{"booleans as separate values", []string{"--alert-on-reload", "true", "--alert-webhook-url", hook, "--alert-structured", "false"}, nil,
			Alert{Enabled: true, Sink: "raw", WebhookURL: hook}},
		{"variables alone", nil, map[string]string{"ALERT_ON_RELOAD": "true", "ALERT_SINK": "gchat", "ALERT_WEBHOOK_URL": other,
			"ALERT_PROXY": "http://p2.example:3128", "ALERT_ADDITIONAL_INFO": "env info", "ALERT_STRUCTURED": "true"},
			Alert{Enabled: true, Sink: "gchat", WebhookURL: other, Proxy: "http://p2.example:3128", AdditionalInfo: "env info", Structured: true}},
		{"flags beat variables", []string{"--alert-on-reload=true", "--alert-sink=slack", "--alert-webhook-url=" + hook,
			"--alert-proxy=http://flag.example:3128", "--alert-additional-info=flag info", "--alert-structured=false"},
			map[string]string{"ALERT_ON_RELOAD": "false", "ALERT_SINK": "gchat", "ALERT_WEBHOOK_URL": other,
				"ALERT_WEBHOOK_PROXY": "http://env.example:3128", "ALERT_ADDITIONAL_INFO": "env info", "ALERT_STRUCTURED": "true"},
			Alert{Enabled: true, Sink: "slack", WebhookURL: hook, Proxy: "http://flag.example:3128", AdditionalInfo: "flag info"}},
		{"--alert-on-reload=false beats ALERT_ON_RELOAD=true", []string{"--alert-on-reload=false"},
			map[string]string{"ALERT_ON_RELOAD": "true", "ALERT_WEBHOOK_URL": other},
			Alert{Sink: "raw", WebhookURL: other}},
		{"flags given, others from variables", []string{"--alert-sink=slack"}, map[string]string{"ALERT_ON_RELOAD": "true", "ALERT_WEBHOOK_URL": other},
			Alert{Enabled: true, Sink: "slack", WebhookURL: other}},
		// v2: a webhook URL turns alerts on. From the flag (v2's form) it does here too.
		{"--alert-webhook-url alone turns alerts on", []string{"--alert-webhook-url=" + hook}, nil,
			Alert{Enabled: true, Sink: "raw", WebhookURL: hook}},
		{"unless --alert-on-reload=false", []string{"--alert-webhook-url=" + hook, "--alert-on-reload=false"}, nil,
			Alert{Sink: "raw", WebhookURL: hook}},
		{"or ALERT_ON_RELOAD=false", []string{"--alert-webhook-url=" + hook}, map[string]string{"ALERT_ON_RELOAD": "false"},
			Alert{Sink: "raw", WebhookURL: hook}},
		// From the environment v1's rule stands: a URL without ALERT_ON_RELOAD=true sends nothing.
		{"ALERT_WEBHOOK_URL alone", nil, map[string]string{"ALERT_WEBHOOK_URL": other}, Alert{Sink: "raw", WebhookURL: other}},
		// v2 reads ALERT_PROXY, then v1's ALERT_WEBHOOK_PROXY.
		{"ALERT_PROXY first", nil, map[string]string{"ALERT_PROXY": "http://a.example:1", "ALERT_WEBHOOK_PROXY": "http://b.example:2"},
			Alert{Sink: "raw", Proxy: "http://a.example:1"}},
		{"ALERT_WEBHOOK_PROXY", nil, map[string]string{"ALERT_WEBHOOK_PROXY": "http://b.example:2"}, Alert{Sink: "raw", Proxy: "http://b.example:2"}},
		{"empty sink is raw", []string{"--alert-on-reload", "--alert-sink=", "--alert-webhook-url=" + hook}, nil,
			Alert{Enabled: true, Sink: "raw", WebhookURL: hook}},
	} {
		c, err := parseArgs(t, tt.env, tt.args...)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		got := c.Alert
		got.given = alertGiven{}
		if got != tt.want {
			t.Errorf("%s: alert %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// Values the flags can't take are refused, naming the flag (not the variable) and what it
// takes; a bad variable is named as the variable.
func TestAlertFlagsRefuseBadValues(t *testing.T) {
	const hook = "https://chat.example/T0/s3cr3t"
	for _, tt := range []struct {
		args []string
		env  map[string]string
		want []string
	}{
		{[]string{"--alert-on-reload=maybe"}, nil, []string{"--alert-on-reload", `"maybe"`, "true or false"}},
		{[]string{"--alert-structured=2"}, nil, []string{"--alert-structured", "true or false"}},
		{[]string{"--alert-on-reload", "--alert-sink=pager", "--alert-webhook-url=" + hook}, nil,
			[]string{"--alert-sink", `"pager"`, "slack, teams, gchat, raw"}},
		{[]string{"--alert-sink=pager"}, map[string]string{"ALERT_ON_RELOAD": "true", "ALERT_WEBHOOK_URL": hook}, []string{"--alert-sink", `"pager"`}},
		{[]string{"--alert-on-reload"}, map[string]string{"ALERT_SINK": "pager", "ALERT_WEBHOOK_URL": hook}, []string{"ALERT_SINK", `"pager"`}},
		{[]string{"--alert-on-reload"}, nil, []string{"--alert-webhook-url or ALERT_WEBHOOK_URL", "http(s)"}},
		{[]string{"--alert-webhook-url=chat.example/T0/s3cr3t"}, nil, []string{"--alert-webhook-url", "http(s)"}},
		{[]string{"--alert-webhook-url=" + hook, "--alert-proxy=proxy:3128"}, nil, []string{"--alert-proxy", "http(s)"}},
		{nil, map[string]string{"ALERT_ON_RELOAD": "true", "ALERT_WEBHOOK_URL": hook, "ALERT_PROXY": "proxy:3128"},
			[]string{"ALERT_PROXY or ALERT_WEBHOOK_PROXY"}},
	} {
		_, err := parseArgs(t, tt.env, tt.args...)
		if err == nil {
			t.Errorf("%v %v accepted", tt.args, tt.env)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v %v: %v does not say %s", tt.args, tt.env, err, w)
			}
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%v: the error shows the URL's token: %v", tt.args, err)
		}
	}
	// Alerts off: the other settings are never read, as with the variables.
	if _, err := parseArgs(t, nil, "--alert-sink=pager"); err != nil {
		t.Errorf("alerts off, a bad sink refused: %v", err)
	}
}

// The webhook URL and the proxy are secrets: the effective flags tell only whether they are
// set, and a cleartext URL's warning names the flag and host alone.
func TestAlertSecretsStayOutOfEffectiveFlags(t *testing.T) {
	o := parse(t, "--alert-webhook-url=http://chat.example/T0/s3cr3t", "--alert-proxy=http://user:pa55@proxy.example:3128")
	eff := o.Effective()
	for k, v := range eff {
		if strings.Contains(v, "s3cr3t") || strings.Contains(v, "pa55") {
			t.Errorf("effective flag %s shows a secret: %q", k, v)
		}
	}
	if eff["alert-webhook-url-set"] != "true" || eff["alert-proxy-set"] != "true" || eff["alert-sink"] != "" {
		t.Errorf("effective alert flags: url set %q, proxy set %q, sink %q", eff["alert-webhook-url-set"], eff["alert-proxy-set"], eff["alert-sink"])
	}
	c, err := Load(o, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(c.Warnings, "\n")
	if !strings.Contains(joined, "--alert-webhook-url: http://chat.example is not TLS") || strings.Contains(joined, "s3cr3t") {
		t.Errorf("warnings %q", c.Warnings)
	}
}

// --alert-structured asks v2's raw sink for a JSON document of v2's own fields; reloader's raw
// sink posts its own JSON. Given with alerts on and the raw sink, a warning says so; not
// given, or for another sink (v2 ignores it there too), nothing is said.
func TestAlertStructuredWarns(t *testing.T) {
	const hook = "https://chat.example/T0/s3cr3t"
	for _, tt := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--alert-webhook-url=" + hook}, nil, ""},
		{[]string{"--alert-webhook-url=" + hook, "--alert-structured"}, nil, "--alert-structured: reloader's raw sink posts JSON"},
		{[]string{"--alert-webhook-url=" + hook, "--alert-structured=false"}, nil, "--alert-structured=false: reloader's raw sink posts JSON"},
		{[]string{"--alert-webhook-url=" + hook}, map[string]string{"ALERT_STRUCTURED": "true"}, "ALERT_STRUCTURED: reloader's raw sink posts JSON"},
		{[]string{"--alert-webhook-url=" + hook, "--alert-sink=slack", "--alert-structured"}, nil, ""},
		{[]string{"--alert-structured"}, nil, ""},
		// A word that is no boolean is off, as upstream reads it: warned of, then off is described.
		{[]string{"--alert-webhook-url=" + hook}, map[string]string{"ALERT_STRUCTURED": "yes"}, `ALERT_STRUCTURED: "yes" is neither true nor false`},
	} {
		c, err := parseArgs(t, tt.env, tt.args...)
		if err != nil {
			t.Errorf("%v %v: %v", tt.args, tt.env, err)
			continue
		}
		var said []string
		for _, w := range c.Warnings {
			if strings.Contains(w, "ALERT_STRUCTURED") || strings.Contains(w, "--alert-structured") {
				said = append(said, w)
			}
		}
		switch {
		case tt.want == "" && len(said) > 0:
			t.Errorf("%v %v: warned %q", tt.args, tt.env, said)
		case tt.want != "" && (len(said) == 0 || !strings.HasPrefix(said[0], tt.want)):
			t.Errorf("%v %v: warnings %q, want one starting %q", tt.args, tt.env, said, tt.want)
		case len(said) > 2 || len(said) == 2 && tt.env["ALERT_STRUCTURED"] != "yes":
			t.Errorf("%v %v: warnings %q, one too many", tt.args, tt.env, said)
		}
	}
}
