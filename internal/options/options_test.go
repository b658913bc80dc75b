package options

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/testutil"
)

func parse(t *testing.T, args ...string) Options {
	t.Helper()
	o := Default()
	fs := pflag.NewFlagSet("reloader", pflag.ContinueOnError)
	o.BindFlags(fs)
	testutil.Must(t, fs.Parse(args))
	return o
}

func applyEnv(t *testing.T, o *Options, env map[string]string) {
	t.Helper()
	testutil.Must(t, o.ApplyEnv(func(k string) string { return env[k] }))
}

func TestAnnotationFlagsRenameKeys(t *testing.T) {
	o := parse(t,
		"--auto-annotation=a.example/auto",
		"--configmap-annotation=a.example/cm-reload",
		"--secret-auto-annotation=a.example/secret-auto",
		"--secret-exclude-annotation=a.example/secret-exclude",
		"--ignore-annotation=a.example/ignore",
		"--search-match-annotation=a.example/match",
	)
	checks := map[string]string{
		o.Keys.Auto:                        "a.example/auto",
		o.Keys.Reload[source.ConfigMap]:    "a.example/cm-reload",
		o.Keys.TypedAuto[source.Secret]:    "a.example/secret-auto",
		o.Keys.Exclude[source.Secret]:      "a.example/secret-exclude",
		o.Keys.Ignore:                      "a.example/ignore",
		o.Keys.Match:                       "a.example/match",
		o.Keys.Reload[source.Secret]:       "secret.reloader.stakater.com/reload",
		o.Keys.TypedAuto[source.ConfigMap]: "configmap.reloader.stakater.com/auto",
	}
	for got, want := range checks {
		if got != want {
			t.Errorf("key %q, want %q", got, want)
		}
	}
	if d := Default(); d.Keys.Auto != "reloader.stakater.com/auto" {
		t.Errorf("parsing changed the defaults: %q", d.Keys.Auto)
	}
}

func TestUpstreamFlagSpellingsParse(t *testing.T) {
	o := parse(t, "--is-Argo-Rollouts=true", "--reload-on-create=true", "--resources-to-ignore=configMaps",
		"--ignored-workload-types=jobs,cronjobs", "--namespaces=a,b", "--log-format=json", "--log-level=debug")
	c, err := Parse(o)
	testutil.Must(t, err)
	if !c.IsArgoRollouts || !c.ReloadOnCreate || len(c.Namespaces) != 2 || !c.IgnoredSources[source.ConfigMap] || c.IgnoredSources[source.Secret] {
		t.Errorf("parsed %+v", c)
	}
	if !c.IgnoresWorkload("CronJob") || !c.IgnoresWorkload("Job") || c.IgnoresWorkload("Deployment") {
		t.Error("--ignored-workload-types=jobs,cronjobs matched wrongly")
	}
}

func TestWorkloadBehaviourFlagsParse(t *testing.T) {
	o := parse(t, "--run-cronjobs-on-reload", "--recreate-finished-jobs", "--reload-on-delete",
		"--rollout-strategy-annotation=example.com/strategy", "--secretproviderclass-auto-annotation=example.com/spc")
	if !o.RunCronJobsOnReload || !o.RecreateFinishedJobs || !o.ReloadOnDelete {
		t.Errorf("parsed %+v", o)
	}
	if o.Keys.RolloutStrategy != "example.com/strategy" || o.Keys.TypedAuto[source.SecretProviderClass] != "example.com/spc" {
		t.Errorf("annotation keys %+v", o.Keys)
	}
}

func TestEnvironment(t *testing.T) {
	env := map[string]string{"KUBERNETES_NAMESPACE": "team-a", "METRICS_COUNT_BY_NAMESPACE": "enabled", "POD_NAMESPACE": "reloader"}
	o := Default()
	applyEnv(t, &o, env)
	if len(o.Namespaces) != 1 || o.Namespaces[0] != "team-a" || !o.MetricsCountByNamespace || o.LeaderElectionNamespace != "reloader" {
		t.Errorf("env not applied: %v %v %q", o.Namespaces, o.MetricsCountByNamespace, o.LeaderElectionNamespace)
	}
	o = parse(t, "--namespaces=x")
	applyEnv(t, &o, env)
	if len(o.Namespaces) != 1 || o.Namespaces[0] != "x" {
		t.Errorf("KUBERNETES_NAMESPACE overrode --namespaces: %v", o.Namespaces)
	}
}

func TestAlertAndIdentityEnvironment(t *testing.T) {
	env := map[string]string{"ALERT_ON_RELOAD": "true", "ALERT_SINK": "Slack", "ALERT_WEBHOOK_URL": "https://hooks.example/x",
		"ALERT_WEBHOOK_PROXY": "http://proxy:3128", "ALERT_ADDITIONAL_INFO": "cluster prod-eu", "POD_NAME": "reloader-7f9",
		"POD_NAMESPACE": "ops", "RELOADER_DEPLOYMENT_NAME": "reloader"}
	o := Default()
	applyEnv(t, &o, env)
	want := Alert{Enabled: true, Sink: "slack", WebhookURL: "https://hooks.example/x", Proxy: "http://proxy:3128", AdditionalInfo: "cluster prod-eu"}
	if got := o.Alert; got.Enabled != want.Enabled || got.Sink != want.Sink || got.WebhookURL != want.WebhookURL ||
		got.Proxy != want.Proxy || got.AdditionalInfo != want.AdditionalInfo || got.Structured {
		t.Errorf("alert %+v, want %+v", o.Alert, want)
	}
	if o.LeaderIdentity != "reloader-7f9" || o.ReloaderNamespace != "ops" || o.ReloaderDeployment != "reloader" {
		t.Errorf("identity %q, meta-info namespace %q, deployment %q", o.LeaderIdentity, o.ReloaderNamespace, o.ReloaderDeployment)
	}
	if _, err := Parse(o); err != nil {
		t.Error(err)
	}
	env["RELOADER_NAMESPACE"] = "meta"
	applyEnv(t, &o, env)
	if o.ReloaderNamespace != "meta" {
		t.Errorf("RELOADER_NAMESPACE not preferred over POD_NAMESPACE: %q", o.ReloaderNamespace)
	}
}

func TestNamespaceSelectorForms(t *testing.T) {
	ns := func(l map[string]string) labels.Set { return labels.Set(l) }
	cases := []struct {
		selector string
		matches  []labels.Set
		misses   []labels.Set
	}{
		{"team:a", []labels.Set{ns(map[string]string{"team": "a"})}, []labels.Set{ns(map[string]string{"team": "b"}), nil}},
		{"team:*", []labels.Set{ns(map[string]string{"team": "b"})}, []labels.Set{ns(map[string]string{"other": "x"})}},
		{"team:a,env:prod", []labels.Set{ns(map[string]string{"team": "a", "env": "prod"})}, []labels.Set{ns(map[string]string{"team": "a"})}},
		{"env in (prod,staging),!skip", []labels.Set{ns(map[string]string{"env": "prod"})}, []labels.Set{ns(map[string]string{"env": "prod", "skip": ""})}},
		{"*", []labels.Set{nil, ns(map[string]string{"a": "b"})}, nil},
	}
	for _, c := range cases {
		conf, err := Parse(parse(t, "--namespace-selector="+c.selector))
		if err != nil {
			t.Errorf("%q: %v", c.selector, err)
			continue
		}
		sel := conf.NamespaceLabels
		for _, l := range c.matches {
			if !sel.Matches(l) {
				t.Errorf("%q does not match %v", c.selector, l)
			}
		}
		for _, l := range c.misses {
			if sel.Matches(l) {
				t.Errorf("%q matches %v", c.selector, l)
			}
		}
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	o := parse(t, "--reload-strategy=restart", "--resources-to-ignore=pods", "--log-level=loud", "--coalesce-window=-1s",
		"--namespace-selector=a in (", "--webhook-url=ftp://x", "--enable-ha", "--leader-election-renew-deadline=1m")
	o.Alert = Alert{Enabled: true, Sink: "pager", WebhookURL: "not a url"}
	_, err := Parse(o)
	if err == nil {
		t.Fatal("bad options accepted")
	}
	for _, want := range []string{"--reload-strategy", "--resources-to-ignore", "--log-level", "--coalesce-window",
		"--namespace-selector", "--webhook-url", "--leader-election-lease-duration", "ALERT_SINK", "ALERT_WEBHOOK_URL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s: %v", want, err)
		}
	}
	both := parse(t, "--resources-to-ignore=configMaps,secrets")
	if _, err := Parse(both); err == nil {
		t.Error("ignoring both kinds accepted")
	}
}

// An upstream leader and a reloader leader must contend for one Lease during a rolling switch.
func TestLeaseNameIsUpstreamsUnlessOverridden(t *testing.T) {
	if got := parse(t).LeaderElectionID; got != "stakater-reloader-lock" {
		t.Errorf("default Lease %q", got)
	}
	if got := parse(t, "--leader-election-id=mine").LeaderElectionID; got != "mine" {
		t.Errorf("--leader-election-id gave %q", got)
	}
}

// Finished Jobs are re-run by default, as upstream does; the flag opts out.
func TestRecreateFinishedJobsDefaultsToUpstreamsBehaviour(t *testing.T) {
	if !parse(t).RecreateFinishedJobs {
		t.Error("finished Jobs are skipped by default")
	}
	if parse(t, "--recreate-finished-jobs=false").RecreateFinishedJobs {
		t.Error("--recreate-finished-jobs=false ignored")
	}
}

func TestParseSelectorForms(t *testing.T) {
	for in, want := range map[string]string{
		"":                          "<nil>",
		"*":                         "",
		"a:b":                       "a=b",
		"a:*,b=*":                   "a,b",
		"a=b,*":                     "a=b",
		"env in (x,y),c:d,!e":       "c=d,!e,env in (x,y)",
		"a!=b":                      "a!=b",
		"k.example.com/x:v,other=*": "k.example.com/x=v,other",
	} {
		sel, err := ParseSelector(in)
		got := "<nil>"
		if sel != nil {
			got = sel.String()
		}
		if err != nil || got != want {
			t.Errorf("ParseSelector(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseSelector("a in ("); err == nil {
		t.Error("a broken selector parsed")
	}
}
