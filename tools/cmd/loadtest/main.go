// Command loadtest compares two reloader-compatible builds on load scenarios: `run` drives
// them one after the other against fresh local control planes and measures them from outside;
// `report` turns the results into text, JSON, Markdown and HTML; `figures` condenses the results
// of runs against one or more baselines into the documentation's Markdown table.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/reloader-operator/reloader/tools/internal/loadtest"
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
	root.AddCommand(newRun(), newReport(), newFigures())
	return root
}

func bindGates(fs *pflag.FlagSet, g *loadtest.Gates) {
	fs.IntVar(&g.MaxMissed, "gate-max-missed", g.MaxMissed, "missed reloads allowed per side")
	fs.IntVar(&g.MaxDuplicates, "gate-max-duplicates", g.MaxDuplicates, "duplicate reloads allowed per side")
	fs.IntVar(&g.MaxUnexpected, "gate-max-unexpected", g.MaxUnexpected, "unexpected reloads allowed per side")
	fs.Float64Var(&g.LatencyRatio, "gate-latency-ratio", g.LatencyRatio, "each side's p50/p95 latency from the last write covered may be this many times the other's ...")
	fs.Float64Var(&g.LatencySlackMs, "gate-latency-slack-ms", g.LatencySlackMs, "... plus this")
	fs.Float64Var(&g.P99Ratio, "gate-p99-ratio", g.P99Ratio, "each side's p99 latency from the last write covered may be this many times the other's ...")
	fs.Float64Var(&g.P99SlackMs, "gate-p99-slack-ms", g.P99SlackMs, "... plus this")
	fs.Float64Var(&g.APIRatio, "gate-api-ratio", g.APIRatio, "each side's API requests and writes may be this many times the other's ...")
	fs.IntVar(&g.APISlack, "gate-api-slack", g.APISlack, "... plus this")
	fs.Float64Var(&g.ListRatio, "gate-list-ratio", g.ListRatio, "each side's LISTs may be this many times the other's ...")
	fs.Float64Var(&g.ListSlack, "gate-list-slack", g.ListSlack, "... plus this")
	fs.Float64Var(&g.ErrorRatio, "gate-error-ratio", g.ErrorRatio, "each side's errors (reloader_errors_total) may be this many times the other's ...")
	fs.Float64Var(&g.ErrorSlack, "gate-error-slack", g.ErrorSlack, "... plus this")
	fs.Float64Var(&g.CPURatio, "gate-cpu-ratio", g.CPURatio, "each side's CPU seconds may be this many times the other's ...")
	fs.Float64Var(&g.CPUSlackSeconds, "gate-cpu-slack-seconds", g.CPUSlackSeconds, "... plus this")
	fs.Float64Var(&g.MemoryRatio, "gate-memory-ratio", g.MemoryRatio, "each side's peak RSS may be this many times the other's ...")
	fs.Float64Var(&g.MemorySlackMiB, "gate-memory-slack-mib", g.MemorySlackMiB, "... plus this")
	fs.Float64Var(&g.MaxIdleRPSIncrease, "gate-idle-rps-increase", g.MaxIdleRPSIncrease, "rate of repeated requests (same verb and object more than once) after the load may exceed the rate before it by this (hot-loop check)")
	fs.Float64Var(&g.MaxReconcileReturnSeconds, "gate-reconcile-return-seconds", g.MaxReconcileReturnSeconds, "the reconcile rate must be back at its rate before the load within this many seconds of the load settling (hot-loop check; measured up to 60 s)")
	fs.Float64Var(&g.WarnAt, "gate-warn-at", g.WarnAt, "a comparative gate WARNs this far (0..1) from the other side's figure to its FAIL limit")
}

func newRun() *cobra.Command {
	var (
		oldBin, newBin, oldArgs, newArgs, scenarios, results, kubeconfig, metricsFlag, crdDir string
		oldMetricsFlag, newMetricsFlag                                                        string
		duration                                                                              time.Duration
		scale                                                                                 float64
		parallelism, nodes                                                                    int
		gates                                                                                 = loadtest.DefaultGates()
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run scenarios against one or two builds and write results and reports",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var sides []loadtest.Side
			for _, s := range []struct{ name, bin, args, metricsFlag string }{
				{"old", oldBin, oldArgs, oldMetricsFlag}, {"new", newBin, newArgs, newMetricsFlag}} {
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
				flag := metricsFlag
				if cmd.Flags().Changed(s.name + "-metrics-addr-flag") {
					flag = s.metricsFlag
				}
				if flag == "auto" {
					flag = loadtest.DetectMetricsAddrFlag(bin)
					fmt.Fprintf(os.Stderr, "%s side: metrics address flag %q (from its --help)\n", s.name, flag)
				}
				sides = append(sides, loadtest.Side{Name: s.name, Bin: bin, Args: strings.Fields(s.args), MetricsAddrFlag: &flag})
			}
			if len(sides) == 0 {
				return errors.New("give --new, --old, or both")
			}
			selected, err := loadtest.Select(scenarios)
			if err != nil {
				return err
			}
			if scale <= 0 || duration < 0 {
				return errors.New("--scale must be positive and --duration not negative")
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rs, err := loadtest.Run(ctx, loadtest.Config{Sides: sides, Scenarios: selected, Parallelism: parallelism,
				Params: loadtest.Params{Scale: scale, Duration: duration}, ResultsDir: results, Kubeconfig: kubeconfig,
				MetricsAddrFlag: metricsFlag, Nodes: nodes, CRDDir: crdDir, Progress: os.Stderr})
			if err != nil {
				return err
			}
			return report(rs, gates, results, nil, "")
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&oldBin, "old", "", "binary of the baseline build")
	fs.StringVar(&newBin, "new", "", "binary of the build under test")
	fs.StringVar(&oldArgs, "old-args", "", "extra flags for the old binary, space-separated")
	fs.StringVar(&newArgs, "new-args", "", "extra flags for the new binary, space-separated")
	fs.StringVar(&scenarios, "scenario", "all", "scenarios to run: all, or a comma-separated list of S1..S19")
	fs.DurationVar(&duration, "duration", 0, "how long each timed scenario drives load; 0: each scenario's design duration times --scale (at least 5s)")
	fs.Float64Var(&scale, "scale", 1, "the size of every scenario as a share of the design's: 1 is the design's size, 0.1 a tenth (for CI)")
	fs.IntVar(&parallelism, "parallelism", 1, "scenarios run at once, each on its own control plane (the sides of one scenario never overlap)")
	fs.StringVar(&results, "results-dir", "loadtest-results", "where results, logs, audit logs and reports go")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "run on this existing cluster instead of local control planes (no audit log: API counts are left out)")
	fs.StringVar(&metricsFlag, "metrics-addr-flag", "auto", "the flag that sets a binary's metrics address; empty if it has none (it then must listen on :9090, as upstream's does, and --parallelism must be 1); auto: --metrics-addr if the binary's --help lists it, else none")
	fs.StringVar(&oldMetricsFlag, "old-metrics-addr-flag", "", "--metrics-addr-flag for the old binary alone")
	fs.StringVar(&newMetricsFlag, "new-metrics-addr-flag", "", "--metrics-addr-flag for the new binary alone")
	fs.IntVar(&nodes, "nodes", 3, "fake kwok nodes per local control plane")
	fs.StringVar(&crdDir, "crd-dir", "deployments/chart/reloader/files/crds", "the ReloaderConfig CRD, installed into each local control plane (scenarios S16 and S17 need it)")
	bindGates(fs, &gates)
	return cmd
}

func newReport() *cobra.Command {
	var results, scenarios, output string
	gates := loadtest.DefaultGates()
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Judge the results of a run again (say, with other gates) and rewrite its reports",
		Long: `Judge the results of a run again and write its reports. Without --scenario and --output it
rewrites every report of the results directory; --scenario keeps only some scenarios, and
--output writes to a file (its extension names the format: .txt, .json, .md, .html) or, for
a path without one of those extensions, all four formats into that directory.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			rs, err := loadtest.LoadResults(results)
			if err != nil {
				return err
			}
			var only []string
			if scenarios != "" && scenarios != "all" {
				only = strings.Split(scenarios, ",")
			}
			return report(rs, gates, results, only, output)
		},
	}
	cmd.Flags().StringVar(&results, "results-dir", "loadtest-results", "directory written by run")
	cmd.Flags().StringVar(&scenarios, "scenario", "all", "report only these scenarios (comma-separated IDs)")
	cmd.Flags().StringVar(&output, "output", "", "write the report here instead of into --results-dir: a .txt, .json, .md or .html file, or a directory")
	bindGates(cmd.Flags(), &gates)
	return cmd
}

func newFigures() *cobra.Command {
	var dirs []string
	var update, vsUpstream bool
	cmd := &cobra.Command{
		Use:   "figures [--vs-upstream] [--results-dir DIR]... | --update FILE...",
		Short: "Print the condensed Markdown table of runs against baselines, or re-render it in documents",
		Long: `Print one condensed Markdown table for one or more results directories, each one A/B run of
this build (side new) against one baseline (side old): this build's verdict, then per baseline
its verdict and this build's API requests, p50 from the last write, peak RSS and CPU seconds
over the baseline's, with a line per run naming the builds, the size and the machine.
Verdicts are judged with the default gates. With --vs-upstream, the vs-upstream preset's table
instead (make bench-vs-upstream): each figure of its four scenarios, per run the baseline's and
this build's, and whether this build meets its target against the last run's baseline.

With --update, rewrite in place every block of the given Markdown files between
<!-- figures:begin [vs-upstream | guardrails] DIR [DIR...] --> and <!-- figures:end -->, from the results
directories the begin marker names (relative to the current directory): what make figures does.`,
		RunE: func(_ *cobra.Command, args []string) error {
			if update {
				if len(dirs) > 0 || len(args) == 0 {
					return errors.New("--update takes the files to rewrite, and no --results-dir (their markers name it)")
				}
				return loadtest.UpdateFigureFiles(".", args)
			}
			if len(args) > 0 {
				return fmt.Errorf("unexpected arguments %q (files to rewrite need --update)", args)
			}
			runs, err := loadtest.LoadFigureRuns(".", dirs)
			if err != nil {
				return err
			}
			if vsUpstream {
				loadtest.VsUpstream(os.Stdout, runs)
			} else {
				loadtest.Figures(os.Stdout, runs)
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&dirs, "results-dir", nil, "a results directory of one run against one baseline; repeat for more baselines")
	cmd.Flags().BoolVar(&vsUpstream, "vs-upstream", false, "print the vs-upstream preset's table (issue 35's figures and targets) instead")
	cmd.Flags().BoolVar(&update, "update", false, "re-render the figures blocks of the Markdown files given as arguments in place")
	return cmd
}

// report prints the text report, writes every format, and fails when a gate fails for the
// build under test (new; old when it is the only side): the old side's failures are reported,
// not counted. only keeps some scenarios; output, when set, is where the report goes.
func report(rs []loadtest.Result, gates loadtest.Gates, dir string, only []string, output string) error {
	rep := loadtest.Build(rs, gates)
	if only != nil {
		var err error
		if rep, err = rep.Only(only); err != nil {
			return err
		}
	}
	rep.Text(os.Stdout)
	switch ext := strings.TrimPrefix(filepath.Ext(output), "."); {
	case output == "" && only == nil:
		if err := rep.WriteAll(dir); err != nil {
			return err
		}
		fmt.Printf("reports: %s/report.{txt,json,md,html}, one per scenario in %s/scenarios/\n", dir, dir)
	case output == "":
		return errors.New("--scenario needs --output, so as not to overwrite the full reports")
	case slices.Contains(loadtest.Formats, ext):
		if err := rep.WriteFile(output); err != nil {
			return err
		}
		fmt.Printf("report: %s\n", output)
	default:
		if err := os.MkdirAll(output, 0o755); err != nil {
			return err
		}
		for _, f := range loadtest.Formats {
			if err := rep.WriteFile(filepath.Join(output, "report."+f)); err != nil {
				return err
			}
		}
		fmt.Printf("reports: %s/report.{txt,json,md,html}\n", output)
	}
	if !rep.Pass {
		return fmt.Errorf("load test gates failed for the %s build", rep.Judged)
	}
	return nil
}
