package main

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// parseAsCommand runs the command's own parsing on args and returns the options it would
// run with, checked and parsed as at start-up.
func parseAsCommand(t *testing.T, args ...string) (options.Config, error) {
	t.Helper()
	var got options.Config
	ran := false
	err := execute(args, func(_ context.Context, c options.Config) error {
		ran = true
		got = c
		return nil
	})
	if err == nil && !ran {
		t.Fatalf("%v: the command did not run", args)
	}
	return got, err
}

// Upstream's chart renders --namespace-selector="env=test", quotes included in the argument.
func TestQuotedSelectorsAsUpstreamsChartRendersThem(t *testing.T) {
	o, err := parseAsCommand(t, `--namespace-selector="env=test"`, `--resource-label-selector="reload=yes"`)
	testutil.Must(t, err)
	if o.NamespaceSelector != "env=test" || o.ResourceLabelSelector != "reload=yes" {
		t.Errorf("selectors %q, %q", o.NamespaceSelector, o.ResourceLabelSelector)
	}
}

func TestRepeatedSelectorsAndUpstreamForms(t *testing.T) {
	cases := []struct {
		args    []string
		matches labels.Set
		misses  labels.Set
	}{
		{[]string{"--namespace-selector=env=test", "--namespace-selector=team:*"},
			labels.Set{"env": "test", "team": "a"}, labels.Set{"env": "test"}},
		{[]string{"--namespace-selector=team=*"}, labels.Set{"team": "b"}, labels.Set{"other": "b"}},
		{[]string{"--namespace-selector=*"}, labels.Set{}, nil},
		{[]string{"--namespace-selector=env in (a,b)", "--namespace-selector", "!skip"},
			labels.Set{"env": "b"}, labels.Set{"env": "b", "skip": ""}},
		{[]string{`--namespace-selector="env in (a,b)",team:x`}, labels.Set{"env": "a", "team": "x"}, labels.Set{"env": "c", "team": "x"}},
	}
	for _, c := range cases {
		o, err := parseAsCommand(t, c.args...)
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
			continue
		}
		sel := o.NamespaceLabels
		if sel == nil {
			t.Errorf("%v: no selector", c.args)
			continue
		}
		if !sel.Matches(c.matches) {
			t.Errorf("%v (%s) does not match %v", c.args, sel, c.matches)
		}
		if c.misses != nil && sel.Matches(c.misses) {
			t.Errorf("%v (%s) matches %v", c.args, sel, c.misses)
		}
	}
	o, err := parseAsCommand(t, "--resource-label-selector=reload:yes", "--resource-label-selector=team=*")
	testutil.Must(t, err)
	if sel := o.SourceLabels; sel == nil || !sel.Matches(labels.Set{"reload": "yes", "team": "a"}) || sel.Matches(labels.Set{"reload": "yes"}) {
		t.Errorf("resource selector %v", sel)
	}
}

// Every boolean flag takes its value as the next argument too, as upstream's string-typed
// switches do.
func TestSpaceSeparatedBooleans(t *testing.T) {
	o, err := parseAsCommand(t, "--reload-on-create", "true", "--auto-reload-all", "false", "--reload-on-delete", "True",
		"--recreate-finished-jobs", "false", "--enable-ha", "false", "--namespaces", "true", "--is-Argo-Rollouts", "1")
	testutil.Must(t, err)
	if !o.ReloadOnCreate || o.AutoReloadAll || !o.ReloadOnDelete || o.RecreateFinishedJobs || o.EnableHA || !o.IsArgoRollouts {
		t.Errorf("parsed %+v", o)
	}
	if len(o.Namespaces) != 1 || o.Namespaces[0] != "true" {
		t.Errorf("a string flag's value was taken for a boolean: namespaces %v", o.Namespaces)
	}
	if _, err := parseAsCommand(t, "--reload-on-create", "yes-please"); err == nil {
		t.Error("a stray positional argument was accepted")
	}
	// Every boolean flag, both spellings.
	fs := newRootCommand(nil).Flags()
	var bools []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Value.Type() == "bool" {
			bools = append(bools, f.Name)
		}
	})
	if len(bools) < 10 {
		t.Fatalf("only %d boolean flags found: %v", len(bools), bools)
	}
	// Flags that, on, need another one.
	needs := map[string][]string{"alert-on-reload": {"--alert-webhook-url=https://hooks.example/x"}}
	for _, name := range bools {
		for _, v := range []string{"true", "false"} {
			cmd := newRootCommand(func(context.Context, options.Config) error { return nil })
			cmd.SetArgs(options.JoinBoolValues(cmd.Flags(), append([]string{"--" + name, v}, needs[name]...)))
			if err := cmd.Execute(); err != nil {
				t.Errorf("--%s %s: %v", name, v, err)
				continue
			}
			if got := cmd.Flags().Lookup(name).Value.String(); got != v {
				t.Errorf("--%s %s parsed as %s", name, v, got)
			}
		}
	}
}

func TestMisspeltWorkloadTypeFailsAtStartUp(t *testing.T) {
	_, err := parseAsCommand(t, "--ignored-workload-types=jobs,cronjbs")
	if err == nil {
		t.Fatal("cronjbs accepted")
	}
	for _, want := range []string{`"cronjbs"`, "deployments", "daemonsets", "statefulsets", "cronjobs", "jobs", "rollouts", "deploymentconfigs"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s: %v", want, err)
		}
	}
	if _, err := parseAsCommand(t, "--ignored-workload-types=Jobs,cronjob,DeploymentConfigs,rollout"); err != nil {
		t.Errorf("singular, plural and mixed case refused: %v", err)
	}
}

// A bad value fails before anything starts, with the flag or variable and what it accepts.
func TestBadValuesFailAtStartUp(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--workers", "four"}, `--workers: "four" is not a whole number`},
		{[]string{"--reload-on-create=maybe"}, `--reload-on-create: "maybe" is not true or false`},
		{[]string{"--coalesce-window=1 minute"}, `--coalesce-window: "1 minute" is not a duration such as 300ms`},
		{[]string{"--workers=-1"}, "--workers: -1 is less than 1"},
		{[]string{"--webhook-retries", "0"}, "--webhook-retries: 0 is less than 1"},
		{[]string{"--leader-election-retry-period=12s"}, "--leader-election-renew-deadline: 10s must be longer than 1.2 × --leader-election-retry-period (12s)"},
	} {
		if _, err := parseAsCommand(t, tt.args...); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v; want %s", tt.args, err, tt.want)
		}
	}
	t.Setenv("KUBERNETES_NAMESPACE", "Team A")
	if _, err := parseAsCommand(t); err == nil || !strings.Contains(err.Error(), `KUBERNETES_NAMESPACE: "Team A"`) {
		t.Errorf("KUBERNETES_NAMESPACE=Team A: error %v", err)
	}
}

// An environment value upstream ignores starts reloader, as it started upstream, with a warning.
func TestUpstreamToleratedEnvironmentStarts(t *testing.T) {
	t.Setenv("ALERT_ON_RELOAD", "on")
	conf, err := parseAsCommand(t)
	if err != nil {
		t.Fatalf("ALERT_ON_RELOAD=on refused: %v", err)
	}
	if conf.Alert.Enabled || len(conf.Warnings) != 1 || !strings.Contains(conf.Warnings[0], `ALERT_ON_RELOAD: "on"`) {
		t.Errorf("alerts %v, warnings %q; want off and one warning naming ALERT_ON_RELOAD", conf.Alert.Enabled, conf.Warnings)
	}
}

// --version answers without options validation or a cluster: run is never called.
func TestVersionPrintsBuildAndExits(t *testing.T) {
	cmd := newRootCommand(func(context.Context, options.Config) error { return errors.New("run called") })
	var out strings.Builder
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--version"})
	testutil.Must(t, cmd.Execute())
	if !strings.HasPrefix(out.String(), "reloader ") || !strings.Contains(out.String(), runtime.Version()) || !strings.Contains(out.String(), "commit ") {
		t.Errorf("--version printed %q", out.String())
	}
}

// Neither command prints through a template of its own (addVersionFlag says why), and the
// plugin answers --version as the controller does.
func TestVersionNeedsNoTemplate(t *testing.T) {
	plugin := newPluginCommand()
	for _, cmd := range []*cobra.Command{newRootCommand(nil), plugin} {
		if got, want := cmd.VersionTemplate(), (&cobra.Command{}).VersionTemplate(); got != want {
			t.Errorf("%s sets a version template %q; it links text/template's reflection into the binary", cmd.Name(), got)
		}
	}
	var out strings.Builder
	plugin.SetOut(&out)
	plugin.SetArgs([]string{"--version"})
	testutil.Must(t, plugin.Execute())
	if !strings.HasPrefix(out.String(), "reloader ") || !strings.Contains(out.String(), runtime.Version()) {
		t.Errorf("kubectl reloader --version printed %q", out.String())
	}
}

func TestStartUntilStoppedReturnsWhenStartIgnoresTheSignal(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	block := make(chan struct{})
	defer close(block)
	stuck := func(context.Context) error { <-block; return nil } // as a manager waiting for a sync
	result := make(chan error, 1)
	go func() { result <- startUntilStopped(ctx, stuck, 50*time.Millisecond) }()
	cancel()
	select {
	case err := <-result:
		if err == nil || !strings.Contains(err.Error(), "never synced") {
			t.Fatalf("err = %v; want the shutdown-grace error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("startUntilStopped did not return after the grace period")
	}
}

func TestStartUntilStoppedReturnsStartsResult(t *testing.T) {
	want := errors.New("boom")
	if err := startUntilStopped(context.Background(), func(context.Context) error { return want }, time.Second); !errors.Is(err, want) {
		t.Fatalf("err = %v; want %v", err, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	clean := func(ctx context.Context) error { <-ctx.Done(); return nil }
	if err := startUntilStopped(ctx, clean, time.Minute); err != nil {
		t.Fatalf("a clean stop returned %v", err)
	}
}
