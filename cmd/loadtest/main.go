// Command loadtest compares two reloader-compatible builds on load scenarios: `run` drives
// them one after the other against fresh local control planes and measures them from outside;
// `report` turns the results into text, JSON, Markdown and HTML.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/reloader-operator/reloader/internal/loadtest"
)

func main() {
	// The local control planes log through controller-runtime; only their errors matter here.
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	if err := newRoot().Execute(); err != nil {
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{Use: "loadtest", Short: "A/B load tests of reloader builds", SilenceUsage: true}
	root.AddCommand(newRun(), newReport())
	return root
}

func bindGates(fs *pflag.FlagSet, g *loadtest.Gates) {
	fs.IntVar(&g.MaxMissed, "gate-max-missed", g.MaxMissed, "missed reloads allowed per side")
	fs.IntVar(&g.MaxDuplicates, "gate-max-duplicates", g.MaxDuplicates, "duplicate reloads allowed per side")
	fs.IntVar(&g.MaxUnexpected, "gate-max-unexpected", g.MaxUnexpected, "unexpected reloads allowed per side")
	fs.Float64Var(&g.LatencyRatio, "gate-latency-ratio", g.LatencyRatio, "each side's p50/p95 latency from the last write covered may be this many times the other's ...")
	fs.Float64Var(&g.LatencySlackMs, "gate-latency-slack-ms", g.LatencySlackMs, "... plus this")
	fs.Float64Var(&g.APIRatio, "gate-api-ratio", g.APIRatio, "each side's API requests and writes may be this many times the other's ...")
	fs.IntVar(&g.APISlack, "gate-api-slack", g.APISlack, "... plus this")
	fs.Float64Var(&g.MemoryRatio, "gate-memory-ratio", g.MemoryRatio, "each side's peak RSS may be this many times the other's ...")
	fs.Float64Var(&g.MemorySlackMiB, "gate-memory-slack-mib", g.MemorySlackMiB, "... plus this")
	fs.Float64Var(&g.MaxIdleRPSIncrease, "gate-idle-rps-increase", g.MaxIdleRPSIncrease, "rate of repeated requests (same verb and object more than once) after the load may exceed the rate before it by this (hot-loop check)")
}

func newRun() *cobra.Command {
	var (
		oldBin, newBin, oldArgs, newArgs, scenarios, results, kubeconfig, metricsFlag, crdDir string
		duration                                                                              time.Duration
		scale, parallelism, nodes                                                             int
		gates                                                                                 = loadtest.DefaultGates()
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run scenarios against one or two builds and write results and reports",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var sides []loadtest.Side
			for _, s := range []struct{ name, bin, args string }{{"old", oldBin, oldArgs}, {"new", newBin, newArgs}} {
				if s.bin == "" {
					continue
				}
				bin, err := filepath.Abs(s.bin)
				if err != nil {
					return err
				}
				if _, err := os.Stat(bin); err != nil {
					return fmt.Errorf("--%s: %w", s.name, err)
				}
				sides = append(sides, loadtest.Side{Name: s.name, Bin: bin, Args: strings.Fields(s.args)})
			}
			if len(sides) == 0 {
				return errors.New("give --new, --old, or both")
			}
			selected, err := loadtest.Select(scenarios)
			if err != nil {
				return err
			}
			if scale < 1 || duration <= 0 {
				return errors.New("--scale must be at least 1 and --duration positive")
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rs, err := loadtest.Run(ctx, loadtest.Config{Sides: sides, Scenarios: selected, Parallelism: parallelism,
				Params: loadtest.Params{Scale: scale, Duration: duration}, ResultsDir: results, Kubeconfig: kubeconfig,
				MetricsAddrFlag: metricsFlag, Nodes: nodes, CRDDir: crdDir, Progress: os.Stderr})
			if err != nil {
				return err
			}
			return report(rs, gates, results)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&oldBin, "old", "", "binary of the baseline build")
	fs.StringVar(&newBin, "new", "", "binary of the build under test")
	fs.StringVar(&oldArgs, "old-args", "", "extra flags for the old binary, space-separated")
	fs.StringVar(&newArgs, "new-args", "", "extra flags for the new binary, space-separated")
	fs.StringVar(&scenarios, "scenario", "all", "scenarios to run: all, or a comma-separated list of S1..S15")
	fs.DurationVar(&duration, "duration", 20*time.Second, "how long each timed scenario drives load")
	fs.IntVar(&scale, "scale", 1, "multiplies the object counts of every scenario")
	fs.IntVar(&parallelism, "parallelism", 1, "scenarios run at once, each on its own control plane (the sides of one scenario never overlap)")
	fs.StringVar(&results, "results-dir", "loadtest-results", "where results, logs, audit logs and reports go")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "run on this existing cluster instead of local control planes (no audit log: API counts are left out)")
	fs.StringVar(&metricsFlag, "metrics-addr-flag", "--metrics-addr", "the flag that sets a binary's metrics address; empty if it has none (it then must listen on :9090, and --parallelism must be 1)")
	fs.IntVar(&nodes, "nodes", 3, "fake kwok nodes per local control plane")
	fs.StringVar(&crdDir, "crd-dir", "deployments/chart/reloader/files/crds", "the ReloaderConfig CRD, installed into each local control plane (scenarios S16 and S17 need it)")
	bindGates(fs, &gates)
	return cmd
}

func newReport() *cobra.Command {
	var results string
	gates := loadtest.DefaultGates()
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Judge the results of a run again (say, with other gates) and rewrite its reports",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			rs, err := loadtest.LoadResults(results)
			if err != nil {
				return err
			}
			return report(rs, gates, results)
		},
	}
	cmd.Flags().StringVar(&results, "results-dir", "loadtest-results", "directory written by run")
	bindGates(cmd.Flags(), &gates)
	return cmd
}

// report prints the text report, writes every format, and fails when a gate fails for the
// build under test (new; old when it is the only side): the old side's failures are reported,
// not counted.
func report(rs []loadtest.Result, gates loadtest.Gates, dir string) error {
	rep := loadtest.Build(rs, gates)
	rep.Text(os.Stdout)
	if err := rep.WriteAll(dir); err != nil {
		return err
	}
	fmt.Printf("reports: %s/report.{txt,json,md,html}\n", dir)
	if !rep.Pass {
		return fmt.Errorf("load test gates failed for the %s build", rep.Judged)
	}
	return nil
}
