package options

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/reloader-operator/reloader/internal/source"
)

func parse(t *testing.T, args ...string) Options {
	t.Helper()
	o := Default()
	fs := pflag.NewFlagSet("reloader", pflag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
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
	if !o.IsArgoRollouts || !o.ReloadOnCreate || len(o.Namespaces) != 2 || !o.IgnoredSourceKinds()[source.ConfigMap] {
		t.Errorf("parsed %+v", o)
	}
	if !o.IgnoresWorkload("CronJob") || o.IgnoresWorkload("Deployment") {
		t.Error("--ignored-workload-types=jobs,cronjobs matched wrongly")
	}
	if err := o.Validate(); err != nil {
		t.Error(err)
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
	if got := o.NotYetImplemented(); len(got) != 0 {
		t.Errorf("implemented flags reported as not implemented: %v", got)
	}
}

func TestEnvironment(t *testing.T) {
	env := map[string]string{"KUBERNETES_NAMESPACE": "team-a", "METRICS_COUNT_BY_NAMESPACE": "enabled", "POD_NAMESPACE": "reloader"}
	o := Default()
	o.ApplyEnv(func(k string) string { return env[k] })
	if len(o.Namespaces) != 1 || o.Namespaces[0] != "team-a" || !o.MetricsCountByNamespace || o.LeaderElectionNamespace != "reloader" {
		t.Errorf("env not applied: %v %v %q", o.Namespaces, o.MetricsCountByNamespace, o.LeaderElectionNamespace)
	}
	o = parse(t, "--namespaces=x")
	o.ApplyEnv(func(k string) string { return env[k] })
	if len(o.Namespaces) != 1 || o.Namespaces[0] != "x" {
		t.Errorf("KUBERNETES_NAMESPACE overrode --namespaces: %v", o.Namespaces)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	o := parse(t, "--reload-strategy=restart", "--resources-to-ignore=pods", "--log-level=loud", "--coalesce-window=-1s")
	err := o.Validate()
	if err == nil {
		t.Fatal("bad options accepted")
	}
	for _, want := range []string{"--reload-strategy", "--resources-to-ignore", "--log-level", "--coalesce-window"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s: %v", want, err)
		}
	}
	both := parse(t, "--resources-to-ignore=configMaps,secrets")
	if err := both.Validate(); err == nil {
		t.Error("ignoring both kinds accepted")
	}
}
