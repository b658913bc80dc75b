package options

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
)

// parseArgs parses args as cmd/reloader does (boolean values as separate arguments joined
// first), then checks them with the environment env.
func parseArgs(t *testing.T, env map[string]string, args ...string) (Config, error) {
	t.Helper()
	o := Default()
	fs := pflag.NewFlagSet("reloader", pflag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse(JoinBoolValues(fs, args)); err != nil {
		return Config{}, ExplainFlagError(err)
	}
	if fs.NArg() > 0 {
		t.Fatalf("%v left positional arguments %v", args, fs.Args())
	}
	return Load(o, func(k string) string { return env[k] })
}

// Upstream's later spellings of --is-Argo-Rollouts (v2's tests and README) mean the same.
func TestArgoRolloutsAliases(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--is-Argo-Rollouts=true"}, true},
		{[]string{"--is-Argo-Rollouts", "true"}, true},
		{[]string{"--enable-argo-rollouts"}, true},
		{[]string{"--enable-argo-rollouts=true"}, true},
		{[]string{"--enable-argo-rollouts", "false"}, false},
		{[]string{"--is-argo-rollouts=true"}, true},
		{[]string{"--enable-argo-rollouts=false"}, false},
	} {
		c, err := parseArgs(t, nil, tt.args...)
		if err != nil {
			t.Errorf("%v: %v", tt.args, err)
			continue
		}
		if c.IsArgoRollouts != tt.want {
			t.Errorf("%v: IsArgoRollouts %v, want %v", tt.args, c.IsArgoRollouts, tt.want)
		}
	}
	_, err := parseArgs(t, nil, "--enable-argo-rollouts=maybe")
	if err == nil || !strings.Contains(err.Error(), "true or false") {
		t.Errorf("--enable-argo-rollouts=maybe: %v", err)
	}
}

// --is-openshift: auto watches DeploymentConfigs when served, false never, true when served
// (app warns when not); --ignored-workload-types=deploymentconfigs is false by another name.
func TestIsOpenShift(t *testing.T) {
	for _, tt := range []struct {
		args               []string
		served, notServed  bool // WatchesDeploymentConfigs(true), (false)
		wantAuto, wantTrue bool
	}{
		{nil, true, false, true, false},
		{[]string{"--is-openshift=auto"}, true, false, true, false},
		{[]string{"--is-openshift=AUTO"}, true, false, true, false},
		{[]string{"--is-openshift="}, true, false, true, false},
		{[]string{"--is-openshift=true"}, true, false, false, true},
		{[]string{"--is-openshift", "true"}, true, false, false, true},
		{[]string{"--is-openshift=False"}, false, false, false, false},
		{[]string{"--is-openshift=false"}, false, false, false, false},
		{[]string{"--ignored-workload-types=deploymentconfig"}, false, false, true, false},
		{[]string{"--is-openshift=false", "--ignored-workload-types=deploymentconfigs"}, false, false, false, false},
	} {
		c, err := parseArgs(t, nil, tt.args...)
		if err != nil {
			t.Errorf("%v: %v", tt.args, err)
			continue
		}
		if got := c.WatchesDeploymentConfigs(true); got != tt.served {
			t.Errorf("%v, API served: watches %v, want %v", tt.args, got, tt.served)
		}
		if got := c.WatchesDeploymentConfigs(false); got != tt.notServed {
			t.Errorf("%v, API not served: watches %v, want %v", tt.args, got, tt.notServed)
		}
		if auto := c.OpenShift == nil; auto != tt.wantAuto {
			t.Errorf("%v: auto %v, want %v", tt.args, auto, tt.wantAuto)
		}
		if asked := c.OpenShift != nil && *c.OpenShift; asked != tt.wantTrue {
			t.Errorf("%v: asked for %v, want %v", tt.args, asked, tt.wantTrue)
		}
	}
	for args, want := range map[string][]string{
		"--is-openshift=yes please":                                      {"--is-openshift", `"yes please"`, "auto, true or false"},
		"--is-openshift=true,--ignored-workload-types=deploymentconfigs": {"--is-openshift=true", "--ignored-workload-types"},
	} {
		_, err := parseArgs(t, nil, strings.Split(args, ",")...)
		if err == nil {
			t.Errorf("%s accepted", args)
			continue
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %s", args, err, w)
			}
		}
	}
}

// The leader election flags of upstream's PR 1206 and v2, with upstream's checks.
func TestLeaderElectionFlags(t *testing.T) {
	ok := []struct {
		args                []string
		lease, renew, retry time.Duration
		namespace, id       string
		releaseOnCancel     bool
		env                 map[string]string
	}{
		{nil, 15 * time.Second, 10 * time.Second, 2 * time.Second, "", DefaultLeaderElectionID, true, nil},
		{[]string{"--leader-election-lease-duration=30s", "--leader-election-renew-deadline=20s", "--leader-election-retry-period=4s"},
			30 * time.Second, 20 * time.Second, 4 * time.Second, "", DefaultLeaderElectionID, true, nil},
		{[]string{"--leader-election-lease-duration=1m", "--leader-election-renew-deadline=1500ms", "--leader-election-retry-period=1s"},
			time.Minute, 1500 * time.Millisecond, time.Second, "", DefaultLeaderElectionID, true, nil},
		{[]string{"--leader-election-id=reloader-leader-election", "--leader-election-namespace=ops", "--leader-election-release-on-cancel=false"},
			15 * time.Second, 10 * time.Second, 2 * time.Second, "ops", "reloader-leader-election", false, map[string]string{"POD_NAMESPACE": "pods"}},
		{[]string{"--leader-election-release-on-cancel", "false"},
			15 * time.Second, 10 * time.Second, 2 * time.Second, "pods", DefaultLeaderElectionID, false, map[string]string{"POD_NAMESPACE": "pods"}},
	}
	for _, tt := range ok {
		c, err := parseArgs(t, tt.env, tt.args...)
		if err != nil {
			t.Errorf("%v: %v", tt.args, err)
			continue
		}
		if c.LeaseDuration != tt.lease || c.LeaseRenewDeadline != tt.renew || c.LeaseRetryPeriod != tt.retry {
			t.Errorf("%v: timings %v/%v/%v, want %v/%v/%v", tt.args, c.LeaseDuration, c.LeaseRenewDeadline, c.LeaseRetryPeriod, tt.lease, tt.renew, tt.retry)
		}
		if c.LeaderElectionNamespace != tt.namespace || c.LeaderElectionID != tt.id || c.LeaseReleaseOnCancel != tt.releaseOnCancel {
			t.Errorf("%v: namespace %q id %q release %v", tt.args, c.LeaderElectionNamespace, c.LeaderElectionID, c.LeaseReleaseOnCancel)
		}
	}
	// --leader-election-namespace moves the Lease only: the meta-info ConfigMap stays in
	// POD_NAMESPACE.
	c, err := parseArgs(t, map[string]string{"POD_NAMESPACE": "pods"}, "--leader-election-namespace=ops")
	if err != nil || c.ReloaderNamespace != "pods" {
		t.Errorf("meta-info namespace %q (%v), want pods", c.ReloaderNamespace, err)
	}

	bad := []struct {
		args []string
		want []string
	}{
		{[]string{"--leader-election-lease-duration=15500ms"}, []string{"--leader-election-lease-duration", "15.5s", "whole number of seconds"}},
		{[]string{"--leader-election-lease-duration=500ms", "--leader-election-renew-deadline=400ms", "--leader-election-retry-period=100ms"}, []string{"--leader-election-lease-duration", "500ms", "less than 1s"}},
		{[]string{"--leader-election-lease-duration=3000000000s"}, []string{"--leader-election-lease-duration", "longer than the Lease can record"}},
		{[]string{"--leader-election-lease-duration=10s"}, []string{"--leader-election-lease-duration: 10s must be longer than --leader-election-renew-deadline (10s)"}},
		{[]string{"--leader-election-renew-deadline=20s"}, []string{"--leader-election-lease-duration: 15s must be longer than --leader-election-renew-deadline (20s)"}},
		{[]string{"--leader-election-renew-deadline=2400ms"}, []string{"--leader-election-renew-deadline: 2.4s must be longer than 1.2 × --leader-election-retry-period (2s)"}},
		{[]string{"--leader-election-renew-deadline=0s"}, []string{"--leader-election-renew-deadline", "positive"}},
		{[]string{"--leader-election-retry-period=-1s"}, []string{"--leader-election-retry-period", "positive"}},
		{[]string{"--leader-election-retry-period=2"}, []string{`--leader-election-retry-period: "2" is not a duration`}},
		{[]string{"--leader-election-namespace=Ops"}, []string{"--leader-election-namespace", `"Ops"`, "not a namespace name"}},
		{[]string{"--leader-election-id=a/b"}, []string{"--leader-election-id", "Lease name"}},
	}
	for _, tt := range bad {
		_, err := parseArgs(t, nil, tt.args...)
		if err == nil {
			t.Errorf("%v accepted", tt.args)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q does not say %s", tt.args, err, w)
			}
		}
	}
}

// --metrics-addr and --health-addr take what net.Listen takes, as upstream's v2 (served by
// controller-runtime) does; 0 turns them off.
func TestListenAddresses(t *testing.T) {
	for _, addr := range []string{":9090", "0.0.0.0:9090", "[::]:9090", "localhost:9090", ":8080", ":0", ":http", "0"} {
		for _, flag := range []string{"--metrics-addr", "--health-addr"} {
			if _, err := parseArgs(t, nil, flag+"="+addr); err != nil {
				t.Errorf("%s=%s: %v", flag, addr, err)
			}
		}
	}
	for addr, want := range map[string]string{
		"9090":       "not a listen address",
		":99999":     "0 to 65535",
		":no-such-x": "nor a known service name",
		"":           "not a listen address",
	} {
		for _, flag := range []string{"--metrics-addr", "--health-addr"} {
			_, err := parseArgs(t, nil, flag+"="+addr)
			if addr == "" && flag == "--health-addr" {
				// Empty --health-addr: the probes on the metrics port.
				if err != nil {
					t.Errorf("%s=: %v", flag, err)
				}
				continue
			}
			if err == nil || !strings.Contains(err.Error(), flag) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s=%s: error %v; want it to say %s", flag, addr, err, want)
			}
		}
	}
}

// Every level upstream's chart passes (logrus's) is accepted, in any case.
func TestLogLevels(t *testing.T) {
	for in, want := range map[string]zapcore.Level{
		"trace": -2, "debug": zapcore.DebugLevel, "info": zapcore.InfoLevel, "": zapcore.InfoLevel,
		"warn": zapcore.WarnLevel, "warning": zapcore.WarnLevel, "WARNING": zapcore.WarnLevel,
		"error": zapcore.ErrorLevel, "fatal": zapcore.FatalLevel, "panic": zapcore.PanicLevel, "Debug": zapcore.DebugLevel,
	} {
		c, err := parseArgs(t, nil, "--log-level="+in)
		if err != nil {
			t.Errorf("--log-level=%s: %v", in, err)
			continue
		}
		if c.Level != want {
			t.Errorf("--log-level=%s: %v, want %v", in, c.Level, want)
		}
	}
	_, err := parseArgs(t, nil, "--log-level=verbose")
	if err == nil || !strings.Contains(err.Error(), "trace, debug, info, warn, warning, error, fatal, panic") {
		t.Errorf("--log-level=verbose: %v", err)
	}
}
