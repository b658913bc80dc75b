package main

import (
	"context"
	"strings"
	"testing"
)

// startedWith records what the last parse handed to the command's run function.
var startedWith struct {
	ran bool
	err error
}

// validateOnly stands in for run: it checks the parsed options as start-up does (the options
// type validates itself, or was validated while parsing) and starts nothing. It is generic so
// that it fits execute's run parameter whatever options type that takes.
func validateOnly[C any](_ context.Context, conf C) error {
	startedWith.ran = true
	startedWith.err = nil
	if v, ok := any(&conf).(interface{ Validate() error }); ok {
		startedWith.err = v.Validate()
	}
	return startedWith.err
}

// FuzzFlags feeds the reloader command arbitrary arguments, one per line: parsing must
// reject or accept each without panicking, and give the same answer twice.
func FuzzFlags(f *testing.F) {
	for _, seed := range []string{
		"",
		"--auto-reload-all\n--reload-on-create=true\n--reload-on-delete",
		"--reload-strategy=annotations\n--resources-to-ignore=configMaps",
		"--reload-strategy=bogus",
		"--namespace-selector=\"env=test\"\n--resource-label-selector=reload=yes",
		"--namespace-selector=env in (a,b)\n--namespace-selector\n!skip",
		"--namespace-selector=team:*\n--namespaces=a,b\n--namespaces-to-ignore=c",
		"--ignored-workload-types=jobs,cronjobs",
		"--ignored-workload-types=jbos",
		"--webhook-url=http://example.com/hook\n--is-Argo-Rollouts\ntrue",
		"--coalesce-window=-1s",
		"--coalesce-window=1h\n--log-level=debug\n--log-format=json",
		"--enable-ha=true\n--enable-csi-integration",
		"--reload-rate=20\n--reload-burst=5\n--min-reload-interval=10m",
		"--reload-rate=NaN\n--first-sight-rate=+Inf\n--reload-burst=-1",
		"--auto-annotation=\n--configmap-annotation=a.example/x",
		"--namespace-selector=(((",
		"positional",
		"--unknown-flag",
		"-=",
		"--=x",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, input string) {
		args := strings.Split(input, "\n")
		if input == "" {
			args = nil
		}
		for _, a := range args {
			// Help and version print and exit; they start nothing to validate.
			if strings.HasPrefix(a, "--help") || strings.HasPrefix(a, "--version") ||
				(strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.ContainsAny(a, "hv")) {
				t.Skip("help or version")
			}
		}
		first, ran := outcome(args)
		second, ranAgain := outcome(args)
		if first != second || ran != ranAgain {
			t.Fatalf("%q: parsed twice, got %q (ran %v) then %q (ran %v)", args, first, ran, second, ranAgain)
		}
		if first == "" && !ran {
			t.Fatalf("%q: accepted, but the command did not run", args)
		}
	})
}

// outcome parses args as the command does and returns the error text, "" for none, and
// whether the options got as far as the run function.
func outcome(args []string) (string, bool) {
	startedWith.ran, startedWith.err = false, nil
	err := execute(args, validateOnly)
	if err != nil {
		return err.Error(), startedWith.ran
	}
	return "", startedWith.ran
}
