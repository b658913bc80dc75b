package options

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/reloader-operator/reloader/internal/approval"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// Each bad value is refused at start-up with an error that names the flag or variable and
// says what it accepts.
func TestParseRefusesBadValues(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want []string // each must appear in the error
	}{
		{"strategy", []string{"--reload-strategy=restart"}, nil, []string{"--reload-strategy", `"restart"`, "env-vars", "annotations"}},
		{"log level", []string{"--log-level=loud"}, nil, []string{"--log-level", `"loud"`, "debug", "warning"}},
		{"log format", []string{"--log-format=xml"}, nil, []string{"--log-format", "json", "text"}},
		{"source kind", []string{"--resources-to-ignore=pods"}, nil, []string{"--resources-to-ignore", `"pods"`, "configMaps", "secrets"}},
		{"both source kinds", []string{"--resources-to-ignore=configMaps,secrets"}, nil, []string{"--resources-to-ignore", "nothing to watch"}},
		{"workload kind", []string{"--ignored-workload-types=pods"}, nil, []string{"--ignored-workload-types", `"pods"`, "deployments", "cronjobs"}},
		{"namespace name", []string{"--namespaces=team_a"}, nil, []string{"--namespaces", `"team_a"`, "not a namespace name"}},
		{"ignored namespace name", []string{"--namespaces-to-ignore=Kube-System"}, nil, []string{"--namespaces-to-ignore", `"Kube-System"`}},
		{"namespace selector", []string{"--namespace-selector=a in ("}, nil, []string{"--namespace-selector"}},
		{"resource selector", []string{"--resource-label-selector=a!!b"}, nil, []string{"--resource-label-selector"}},
		{"annotation key", []string{"--auto-annotation=reload me"}, nil, []string{"--auto-annotation", `"reload me"`, "annotation key"}},
		{"typed annotation key", []string{"--secret-exclude-annotation="}, nil, []string{"--secret-exclude-annotation", "annotation key"}},
		{"negative coalesce window", []string{"--coalesce-window=-1s"}, nil, []string{"--coalesce-window", "negative"}},
		{"negative reload rate", []string{"--reload-rate=-1"}, nil, []string{"--reload-rate", "-1", "0 (off)"}},
		{"reload rate past the bound", []string{"--reload-rate=1e9"}, nil, []string{"--reload-rate", "10000"}},
		{"no reload burst", []string{"--reload-burst=0"}, nil, []string{"--reload-burst", "from 1"}},
		{"negative first-sight rate", []string{"--first-sight-rate=-5"}, nil, []string{"--first-sight-rate", "-5"}},
		{"min reload interval past a week", []string{"--min-reload-interval=200h"}, nil, []string{"--min-reload-interval", "168h"}},
		{"negative min reload interval", []string{"--min-reload-interval=-1m"}, nil, []string{"--min-reload-interval", "-1m0s"}},
		{"no rollout deadline", []string{"--rollout-deadline=0s"}, nil, []string{"--rollout-deadline", "0s", "10m"}},
		{"rollout deadline past a day", []string{"--rollout-deadline=48h"}, nil, []string{"--rollout-deadline", "48h0m0s", "24h"}},
		{"shards past the bound", []string{"--shards=300"}, nil, []string{"--shards", "300", "from 0 (off) to 256"}},
		{"negative shards", []string{"--shards=-1"}, nil, []string{"--shards", "-1"}},
		{"shards with a single leader", []string{"--shards=3", "--enable-ha"}, nil, []string{"--shards", "--enable-ha", "exclude each other"}},
		{"no client rate", []string{"--kube-api-qps=0"}, nil, []string{"--kube-api-qps", "above 0", "200"}},
		{"client rate past bound", []string{"--kube-api-qps=1e6"}, nil, []string{"--kube-api-qps", "10000"}},
		{"client burst below rate", []string{"--kube-api-qps=100", "--kube-api-burst=50"}, nil, []string{"--kube-api-burst", "50", "--kube-api-qps (100)"}},
		{"mode", []string{"--mode=ask"}, nil, []string{"--mode", `"ask"`, "reload, notify or approve"}},
		{"generic target kinds", []string{"--generic-target-kinds=apps/deployment"}, nil, []string{"--generic-target-kinds", `"apps/deployment"`, "group/Kind"}},
		{"no workers", []string{"--workers=0"}, nil, []string{"--workers", "less than 1"}},
		{"negative workers", []string{"--workers=-4"}, nil, []string{"--workers", "-4"}},
		{"zero reconcile timeout", []string{"--reconcile-timeout=0"}, nil, []string{"--reconcile-timeout", "positive"}},
		{"negative reconcile timeout", []string{"--reconcile-timeout=-1s"}, nil, []string{"--reconcile-timeout", "-1s"}},
		{"metrics address", []string{"--metrics-addr=9090"}, nil, []string{"--metrics-addr", `"9090"`, ":9090", "0 turns it off"}},
		{"metrics port", []string{"--metrics-addr=:99999"}, nil, []string{"--metrics-addr", "0 to 65535"}},
		{"pprof address", []string{"--enable-pprof", "--pprof-addr=localhost"}, nil, []string{"--pprof-addr", ":9090"}},
		{"webhook scheme", []string{"--webhook-url=ftp://hooks.example/x"}, nil, []string{"--webhook-url", "http(s)"}},
		{"no webhook attempts", []string{"--webhook-retries=0"}, nil, []string{"--webhook-retries", "less than 1"}},
		{"no webhook timeout", []string{"--webhook-timeout=0s"}, nil, []string{"--webhook-timeout", "positive"}},
		{"lease name", []string{"--leader-election-id=My Lease"}, nil, []string{"--leader-election-id", "Lease name"}},
		{"renew deadline past lease", []string{"--leader-election-renew-deadline=1m"}, nil, []string{"--leader-election-lease-duration", "--leader-election-renew-deadline (1m0s)"}},
		{"retry period past deadline", []string{"--leader-election-retry-period=10s"}, nil, []string{"--leader-election-renew-deadline", "--leader-election-retry-period (10s)"}},
		{"no retry period", []string{"--leader-election-retry-period=0s"}, nil, []string{"--leader-election-retry-period", "positive"}},
		{"alert sink", nil, map[string]string{"ALERT_ON_RELOAD": "true", "ALERT_SINK": "pager", "ALERT_WEBHOOK_URL": "https://h.example/x"}, []string{"ALERT_SINK", `"pager"`, "slack, teams, gchat, raw"}},
		{"alert without URL", nil, map[string]string{"ALERT_ON_RELOAD": "true"}, []string{"ALERT_WEBHOOK_URL", "http(s)"}},
		{"alert proxy", nil, map[string]string{"ALERT_ON_RELOAD": "true", "ALERT_WEBHOOK_URL": "https://h.example/x", "ALERT_WEBHOOK_PROXY": "proxy:3128"}, []string{"ALERT_WEBHOOK_PROXY"}},
		{"watched namespace variable", nil, map[string]string{"KUBERNETES_NAMESPACE": "Team A"}, []string{"KUBERNETES_NAMESPACE", `"Team A"`}},
		{"own namespace variable", nil, map[string]string{"POD_NAMESPACE": "ops/x"}, []string{"POD_NAMESPACE", "not a namespace name"}},
		{"meta-info namespace variable", nil, map[string]string{"RELOADER_NAMESPACE": "-x"}, []string{"RELOADER_NAMESPACE"}},
		{"deployment name variable", nil, map[string]string{"RELOADER_DEPLOYMENT_NAME": "Reloader!"}, []string{"RELOADER_DEPLOYMENT_NAME", "Deployment name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(parse(t, tt.args...), func(k string) string { return tt.env[k] })
			if err == nil {
				t.Fatalf("%v %v accepted", tt.args, tt.env)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not say %s: %v", want, err)
				}
			}
		})
	}
}

// The paths of webhook URLs hold tokens (Slack, Teams): a refusal must not print them.
func TestURLErrorsKeepThePathSecret(t *testing.T) {
	o := parse(t, "--webhook-url=ftp://hooks.example/T000/B000/s3cr3t")
	_, err := Load(o, func(k string) string {
		return map[string]string{"ALERT_ON_RELOAD": "true", "ALERT_WEBHOOK_URL": "hooks.example/services/t0ken"}[k]
	})
	if err == nil {
		t.Fatal("bad URLs accepted")
	}
	for _, secret := range []string{"s3cr3t", "t0ken"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error shows a URL path: %v", err)
		}
	}
}

func TestFlagValueErrorsSayWhatTheFlagAccepts(t *testing.T) {
	for _, tt := range []struct{ arg, want string }{
		{"--coalesce-window=5 seconds", `--coalesce-window: "5 seconds" is not a duration such as 300ms`},
		{"--webhook-timeout=10", `--webhook-timeout: "10" is not a duration`},
		{"--workers=four", `--workers: "four" is not a whole number`},
		{"--reload-on-create=yes", `--reload-on-create: "yes" is not true or false`},
	} {
		o := Default()
		fs := pflag.NewFlagSet("reloader", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o.BindFlags(fs)
		err := ExplainFlagError(fs.Parse([]string{tt.arg}))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v; want %s", tt.arg, err, tt.want)
		}
	}
	other := errors.New("unknown flag: --nope")
	if err := ExplainFlagError(other); err != other {
		t.Errorf("an unknown flag's error was rewritten: %v", err)
	}
}

func TestParseGivesTypedValues(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, c Config)
	}{
		{"defaults", nil, func(t *testing.T, c Config) {
			if _, ok := c.Strategy.(reload.EnvVars); !ok {
				t.Errorf("strategy %T", c.Strategy)
			}
			if c.Level != zapcore.InfoLevel || c.SourceLabels != nil || c.NamespaceLabels != nil || c.NamespaceFilter != nil ||
				len(c.IgnoredSources) != 0 || c.IgnoresWorkload("Deployment") || len(c.Namespaces) != 0 {
				t.Errorf("defaults parsed to %+v", c)
			}
		}},
		{"mode", []string{"--mode=approve"}, func(t *testing.T, c Config) {
			if c.Mode != approval.Approve {
				t.Errorf("mode %q", c.Mode)
			}
		}},
		{"mode by default", nil, func(t *testing.T, c Config) {
			if c.Mode != approval.Reload {
				t.Errorf("mode %q", c.Mode)
			}
		}},
		{"annotations strategy and trace", []string{"--reload-strategy=annotations", "--log-level=trace"}, func(t *testing.T, c Config) {
			if _, ok := c.Strategy.(reload.Annotations); !ok || c.Level != zapcore.Level(-2) {
				t.Errorf("strategy %T, level %v", c.Strategy, c.Level)
			}
		}},
		{"selectors", []string{"--namespace-selector=team:a", "--resource-label-selector=reload=*"}, func(t *testing.T, c Config) {
			if !c.NamespaceLabels.Matches(labels.Set{"team": "a"}) || c.NamespaceLabels.Matches(labels.Set{"team": "b"}) {
				t.Errorf("namespace selector %v", c.NamespaceLabels)
			}
			if !c.SourceLabels.Matches(labels.Set{"reload": "x"}) || c.SourceLabels.Matches(labels.Set{}) {
				t.Errorf("source selector %v", c.SourceLabels)
			}
		}},
		{"ignored kinds", []string{"--resources-to-ignore=Secrets", "--ignored-workload-types=Job,cronjobs"}, func(t *testing.T, c Config) {
			if !c.IgnoredSources[source.Secret] || c.IgnoredSources[source.ConfigMap] {
				t.Errorf("ignored sources %v", c.IgnoredSources)
			}
			if !c.IgnoresWorkload("Job") || !c.IgnoresWorkload("CronJob") || c.IgnoresWorkload("StatefulSet") {
				t.Error("ignored workloads wrong")
			}
		}},
		{"namespace lists trimmed, empty entries dropped", []string{"--namespaces=a, b,,", "--namespaces-to-ignore=kube-system,, flux-system"}, func(t *testing.T, c Config) {
			if strings.Join(c.Namespaces, "|") != "a|b" || strings.Join(c.NamespacesToIgnore, "|") != "kube-system|flux-system" {
				t.Errorf("namespaces %q, ignored %q", c.Namespaces, c.NamespacesToIgnore)
			}
			if !c.NamespaceFilter.Matches(fields.Set{"metadata.namespace": "a"}) || c.NamespaceFilter.Matches(fields.Set{"metadata.namespace": "flux-system"}) {
				t.Errorf("field selector %v", c.NamespaceFilter)
			}
		}},
		{"metrics off, pprof on an address", []string{"--metrics-addr=0", "--enable-pprof", "--pprof-addr=127.0.0.1:6061"}, func(t *testing.T, c Config) {
			if c.MetricsAddr != "0" || c.PprofAddr != "127.0.0.1:6061" {
				t.Errorf("addresses %q %q", c.MetricsAddr, c.PprofAddr)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse(parse(t, tt.args...))
			testutil.Must(t, err)
			tt.check(t, c)
		})
	}
}

func TestEnvironmentValuesAccepted(t *testing.T) {
	for _, tt := range []struct {
		env            map[string]string
		alert, metrics bool
	}{
		{map[string]string{}, false, false},
		{map[string]string{"ALERT_ON_RELOAD": "false", "METRICS_COUNT_BY_NAMESPACE": "disabled"}, false, false},
		{map[string]string{"ALERT_ON_RELOAD": " True ", "ALERT_WEBHOOK_URL": "https://h.example/x", "METRICS_COUNT_BY_NAMESPACE": "enabled"}, true, true},
		{map[string]string{"ALERT_ON_RELOAD": "1", "ALERT_WEBHOOK_URL": "http://h.example/x"}, true, false},
	} {
		c, err := Load(Default(), func(k string) string { return tt.env[k] })
		if err != nil {
			t.Errorf("%v: %v", tt.env, err)
			continue
		}
		if c.Alert.Enabled != tt.alert || c.MetricsCountByNamespace != tt.metrics {
			t.Errorf("%v: alert %v, metrics by namespace %v", tt.env, c.Alert.Enabled, c.MetricsCountByNamespace)
		}
	}
}

// One start-up error lists the bad flags and the bad variables together.
func TestLoadReportsFlagsAndEnvironmentAtOnce(t *testing.T) {
	_, err := Load(parse(t, "--workers=0", "--log-level=loud"), func(k string) string {
		return map[string]string{"KUBERNETES_NAMESPACE": "Team A"}[k]
	})
	for _, want := range []string{"--workers", "--log-level", "KUBERNETES_NAMESPACE"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s: %v", want, err)
		}
	}
}

// Values upstream ignores must not stop an install that worked with upstream: they are read
// as upstream reads them, and warned about.
func TestEnvironmentValuesUpstreamToleratesAreWarnings(t *testing.T) {
	c, err := Load(Default(), func(k string) string {
		return map[string]string{"ALERT_ON_RELOAD": "yes", "METRICS_COUNT_BY_NAMESPACE": "true"}[k]
	})
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	if c.Alert.Enabled || c.MetricsCountByNamespace {
		t.Errorf("alert %v, metrics by namespace %v; want both off, as upstream", c.Alert.Enabled, c.MetricsCountByNamespace)
	}
	joined := strings.Join(c.Warnings, "\n")
	for _, want := range []string{`ALERT_ON_RELOAD: "yes"`, `METRICS_COUNT_BY_NAMESPACE: "true"`} {
		if !strings.Contains(joined, want) {
			t.Errorf("warnings %q do not name %s", c.Warnings, want)
		}
	}
}

// WEBHOOK_URL carries --webhook-url from a Secret; the flag, when given, wins.
func TestWebhookURLFromEnvironment(t *testing.T) {
	env := func(k string) string { return map[string]string{"WEBHOOK_URL": " https://hooks.example/env "}[k] }
	c, err := Load(Default(), env)
	if err != nil || c.WebhookURL != "https://hooks.example/env" {
		t.Errorf("from WEBHOOK_URL: %q, %v", c.WebhookURL, err)
	}
	c, err = Load(parse(t, "--webhook-url=https://hooks.example/flag"), env)
	if err != nil || c.WebhookURL != "https://hooks.example/flag" {
		t.Errorf("flag and WEBHOOK_URL: %q, %v; want the flag's", c.WebhookURL, err)
	}
	if _, err := Load(Default(), func(k string) string { return map[string]string{"WEBHOOK_URL": "ftp://x/y"}[k] }); err == nil {
		t.Error("a bad WEBHOOK_URL accepted")
	}
}

// URLs without TLS start with a warning that names the setting and the host, never the path.
func TestCleartextURLsWarn(t *testing.T) {
	for _, tt := range []struct {
		args []string
		env  map[string]string
		want []string
	}{
		{nil, nil, nil},
		{[]string{"--webhook-url=https://hooks.example/T0/s3cr3t"}, nil, nil},
		{[]string{"--webhook-url=http://hooks.example/T0/s3cr3t"}, nil, []string{"--webhook-url: http://hooks.example is not TLS"}},
		{nil, map[string]string{"WEBHOOK_URL": "http://relay.svc:8080/s3cr3t"}, []string{"--webhook-url: http://relay.svc:8080 is not TLS"}},
		{nil, map[string]string{"ALERT_ON_RELOAD": "true", "ALERT_WEBHOOK_URL": "http://chat.example/s3cr3t"}, []string{"ALERT_WEBHOOK_URL: http://chat.example is not TLS"}},
		// Alerts off: the URL is never used, so no warning.
		{nil, map[string]string{"ALERT_WEBHOOK_URL": "http://chat.example/s3cr3t"}, nil},
	} {
		c, err := Load(parse(t, tt.args...), func(k string) string { return tt.env[k] })
		if err != nil {
			t.Fatalf("%v %v: %v", tt.args, tt.env, err)
		}
		if len(c.Warnings) != len(tt.want) {
			t.Errorf("%v %v: warnings %q, want %q", tt.args, tt.env, c.Warnings, tt.want)
			continue
		}
		for i, w := range tt.want {
			if !strings.HasPrefix(c.Warnings[i], w) || strings.Contains(c.Warnings[i], "s3cr3t") {
				t.Errorf("warning %q, want %q and no path", c.Warnings[i], w)
			}
		}
	}
}

// pprof serves memory contents: by default only on loopback.
func TestPprofDefaultsToLoopback(t *testing.T) {
	host, _, err := net.SplitHostPort(Default().PprofAddr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		t.Errorf("default --pprof-addr %q is not a loopback address", Default().PprofAddr)
	}
}

// With --metrics-secure the probes move off the metrics port (the kubelet sends no token).
func TestHealthAddr(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"--metrics-secure"}, DefaultSecureHealthAddr},
		{[]string{"--metrics-secure", "--health-addr=:9191"}, ":9191"},
		{[]string{"--health-addr=127.0.0.1:9191"}, "127.0.0.1:9191"},
	} {
		c, err := Parse(parse(t, tt.args...))
		if err != nil || c.HealthAddr != tt.want {
			t.Errorf("%v: health address %q, %v; want %q", tt.args, c.HealthAddr, err, tt.want)
		}
	}
	if _, err := Parse(parse(t, "--health-addr=8081")); err == nil || !strings.Contains(err.Error(), "--health-addr") {
		t.Errorf("a bad --health-addr: %v", err)
	}
}

// Without --health-addr the probes are also served where upstream v2's chart probes (:8080),
// best effort; a --health-addr given, or --v2-health-addr=0, turns that off, and so does a
// port that another of reloader's addresses uses.
func TestV2HealthAddr(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, ":8080"},
		{[]string{"--v2-health-addr=127.0.0.1:18080"}, "127.0.0.1:18080"},
		{[]string{"--v2-health-addr=0"}, ""},
		{[]string{"--health-addr=:8081"}, ""},
		{[]string{"--health-addr=:8080"}, ""},
		{[]string{"--health-addr=0"}, ""},
		{[]string{"--metrics-secure"}, ":8080"},
		{[]string{"--metrics-addr=:8080"}, ""},
		{[]string{"--metrics-addr=0.0.0.0:8080"}, ""},
		{[]string{"--enable-pprof", "--pprof-addr=127.0.0.1:8080"}, ""},
		{[]string{"--pprof-addr=127.0.0.1:8080"}, ":8080"},
	} {
		c, err := Parse(parse(t, tt.args...))
		if err != nil || c.V2ProbeAddr != tt.want {
			t.Errorf("%v: v2 probe address %q, %v; want %q", tt.args, c.V2ProbeAddr, err, tt.want)
		}
	}
	if _, err := Parse(parse(t, "--v2-health-addr=8080")); err == nil || !strings.Contains(err.Error(), "--v2-health-addr") {
		t.Errorf("a bad --v2-health-addr: %v", err)
	}
}
