// Command reloader rolls workloads (Deployments, StatefulSets, DaemonSets, CronJobs, Jobs,
// Argo Rollouts, DeploymentConfigs) when the ConfigMaps, Secrets and CSI secrets they use
// change. It accepts Stakater Reloader's flags, env vars and annotations.
package main

import (
	"context"
	"fmt"
	"os"
	"time"
	// The IANA zones of reload windows, for images without /usr/share/zoneinfo (distroless).
	_ "time/tzdata"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/reloader-operator/reloader/internal/app"
	"github.com/reloader-operator/reloader/internal/gcpolicy"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/planwebhook"
	"github.com/reloader-operator/reloader/internal/version"
)

func main() {
	if isPlugin(os.Args[0]) {
		// kubectl runs "kubectl reloader explain ..." as "kubectl-reloader explain ...".
		if err := newPluginCommand().Execute(); err != nil {
			os.Exit(exitStatus(err))
		}
		return
	}
	if err := execute(os.Args[1:], run); err != nil {
		os.Exit(exitStatus(err))
	}
}

// execute parses args and the environment as upstream's users write them and hands the
// parsed options to run; every bad flag and variable fails here, before run.
func execute(args []string, run func(context.Context, options.Config) error) error {
	cmd := newRootCommand(run)
	cmd.SetArgs(options.JoinBoolValues(cmd.Flags(), args))
	return cmd.Execute()
}

func newRootCommand(run func(context.Context, options.Config) error) *cobra.Command {
	opts := options.Default()
	cmd := &cobra.Command{
		Use:           "reloader",
		Short:         "Roll workloads when the ConfigMaps and Secrets they use change",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: false,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if printVersion(cmd) {
				return nil
			}
			conf, err := options.Load(opts, os.Getenv)
			if err != nil {
				return err
			}
			return run(cmd.Context(), conf)
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return options.ExplainFlagError(err) })
	// `reloader completion bash|zsh|fish|powershell` prints cobra's completion script.
	addVersionFlag(cmd)
	opts.BindFlags(cmd.Flags())
	cmd.AddCommand(newExplainCommand(cmd.Name()), newPlanCommand(cmd.Name()), newReleaseCommand(cmd.Name()), newApproveCommand(cmd.Name()),
		newWavesCommand(cmd.Name(), "resume"), newWavesCommand(cmd.Name(), "abort"))
	return cmd
}

// addVersionFlag adds --version, answered by printVersion. It is not cobra's own flag: cobra
// prints its version through text/template once the wording is changed, and a template's
// calls of methods by name make the linker keep every exported method of every type, which
// grew the binary from 38 to 47 MB and its resident code at start by 3.5 MiB.
func addVersionFlag(cmd *cobra.Command) {
	cmd.Flags().Bool("version", false, "print the version, commit and Go version, and exit")
}

// printVersion prints the version when --version is set, first in RunE: no option is
// validated and no cluster is contacted. It reports whether it printed.
func printVersion(cmd *cobra.Command) bool {
	if v, _ := cmd.Flags().GetBool("version"); !v {
		return false
	}
	fmt.Fprintln(cmd.OutOrStdout(), version.Get().String())
	return true
}

func run(_ context.Context, conf options.Config) error {
	ctx := ctrl.SetupSignalHandler()
	logger := newLogger(conf)
	ctrl.SetLogger(logger)
	gc := gcpolicy.Apply(os.Getenv)
	for _, w := range conf.Warnings {
		logger.Info("WARNING: " + w)
	}
	cfg, err := restConfig(conf.Kubeconfig)
	if err != nil {
		return err
	}
	mgr, err := app.New(ctx, cfg, conf, logger, planwebhook.Serve)
	if err != nil {
		return err
	}
	logger.Info("starting reloader", "namespaces", conf.Namespaces, "strategy", conf.ReloadStrategy,
		"autoReloadAll", conf.AutoReloadAll, "coalesceWindow", conf.CoalesceWindow.String(), "ha", conf.EnableHA,
		"gcPercent", gc.Percent, "gcPercentFromGOGC", gc.FromEnv, "gcMinHeadroomMiB", gc.MinHeadroom>>20,
		"gcStartupHeadroomMiB", gc.StartupHeadroom>>20)
	return startUntilStopped(ctx, mgr.Start, shutdownGrace)
}

// shutdownGrace bounds the wait for the manager after a stop signal; it is below the
// kubelet's default 30 s grace period, so reloader exits on its own terms.
const shutdownGrace = 15 * time.Second

// startUntilStopped runs start and, once ctx is cancelled, waits at most grace for it to
// return. controller-runtime's manager never returns from a stop signal while a cache has
// not synced (say, a kind RBAC forbids): it waits for the sync that can't come. No
// reconcile runs before the caches sync, so exiting then loses nothing.
func startUntilStopped(ctx context.Context, start func(context.Context) error, grace time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- start(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	select {
	case err := <-done:
		return err
	case <-time.After(grace):
		return fmt.Errorf("still stopping %v after the stop signal (a watched kind never synced?); exiting", grace)
	}
}

func newLogger(conf options.Config) logr.Logger {
	encoder := zap.ConsoleEncoder()
	if conf.LogFormat == "json" {
		encoder = zap.JSONEncoder()
	}
	return lazyLogger(zap.New(encoder, zap.Level(conf.Level), zap.StacktraceLevel(zapcore.PanicLevel)))
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("load --kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("find a cluster (set --kubeconfig or KUBECONFIG): %w", err)
	}
	return cfg, nil
}
