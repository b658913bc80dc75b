// Command scalebench measures reloader at scale on a local control plane (see
// tools/internal/scalebench): `make bench-10k` runs it at 10,000 ConfigMaps, `make soak` soaks it.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/reloader-operator/reloader/tools/internal/scalebench"
)

func main() {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "scalebench:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg := scalebench.Config{Out: os.Stderr}
	var soak scalebench.SoakConfig
	fair := scalebench.FairnessConfig{Out: os.Stdout}
	var fairness bool
	var extra, paced, jsonOut, floor string
	var sizeKiB int
	fs := pflag.NewFlagSet("scalebench", pflag.ContinueOnError)
	fs.StringVar(&cfg.Bin, "reloader", "bin/reloader", "the reloader binary under test")
	fs.StringVar(&extra, "reloader-args", "", "more flags for reloader, space-separated")
	fs.StringSliceVar(&cfg.Env, "reloader-env", nil, "environment variables for reloader, e.g. GOMEMLIMIT=90MiB")
	fs.Float64Var(&cfg.QPS, "kube-api-qps", 0, "reloader's --kube-api-qps; 0: its default")
	fs.IntVar(&cfg.Burst, "kube-api-burst", 0, "reloader's --kube-api-burst; 0: its default")
	fs.IntVar(&cfg.ConfigMaps, "configmaps", 10000, "ConfigMaps")
	fs.IntVar(&cfg.Secrets, "secrets", 2000, "Secrets")
	fs.IntVar(&sizeKiB, "size-kib", 10, "data of each ConfigMap and Secret, KiB")
	fs.IntVar(&cfg.Deployments, "deployments", 5000, "Deployments")
	fs.IntVar(&cfg.Shared, "shared", 1000, "Deployments (among --deployments) that use one shared ConfigMap")
	fs.IntVar(&cfg.Namespaces, "namespaces", 10, "namespaces for the other Deployments")
	fs.IntVar(&cfg.Changes, "changes", 500, "ConfigMaps changed after sync")
	fs.Float64Var(&cfg.ChangeRate, "change-rate", 50, "changes per second")
	fs.DurationVar(&cfg.ChangesAfterReady, "changes-after-ready", 0, "start the changes this long after reloader is ready, while first-sight records are written (0: after the last of them)")
	fs.StringVar(&paced, "paced-args", "", "run the fan-out again with these reloader flags added, e.g. --reload-rate=100")
	fs.Float64Var(&cfg.PacedRate, "paced-rate", 0, "the rate --paced-args configure, printed beside the rate observed")
	fs.IntVar(&cfg.Workers, "workers", 32, "objects created at once")
	fs.IntVar(&cfg.Replicas, "replicas", 1, "reloader replicas; above 1 they share --shards, and each one's shards, cache and memory are printed")
	fs.IntVar(&cfg.Shards, "shards", 0, "reloader's --shards, with --replicas above 1")
	fs.StringVar(&cfg.CRDDir, "crd-dir", "", "install the ReloaderConfig CRD from this directory first (deployments/chart/reloader/files/crds), as the chart does")
	fs.StringVar(&jsonOut, "json", "", "also write the figures as JSON to this file")
	fs.StringVar(&floor, "rss-floor", "", "instead of the benchmark: run this build of cmd/rssfloor on an empty control plane; it prints its memory")
	fs.DurationVar(&soak.Duration, "soak", 0, "instead of the benchmark: soak this long (e.g. 30m) and print memory every --soak-every")
	fs.DurationVar(&soak.Every, "soak-every", time.Minute, "how often the soak prints memory")
	fs.IntVar(&soak.Workloads, "soak-workloads", 50, "Deployments of the soak, each with its own ConfigMap and Secret")
	fs.Float64Var(&soak.Rate, "soak-rate", 20, "ConfigMap/Secret updates per second during the soak")
	fs.BoolVar(&fairness, "fairness", false, "instead of the benchmark: time one namespace's reload while another's ConfigMap used by --fairness-busy Deployments changes")
	fs.IntVar(&fair.Busy, "fairness-busy", 2000, "Deployments using the busy namespace's ConfigMap")
	fs.IntVar(&fair.Tries, "fairness-tries", 20, "reloads of the quiet namespace timed, per rate")
	fs.Float64SliceVar(&fair.Rates, "fairness-rates", []float64{0, 50}, "--reload-rate of each run; 0 leaves it unset")
	fs.DurationVar(&fair.Timeout, "fairness-timeout", 10*time.Second, "a try whose reload has not come by then counts as a timeout")
	if err := fs.Parse(args); err != nil {
		return err
	}
	bin, err := filepath.Abs(cfg.Bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("--reloader: %w (run make build)", err)
	}
	cfg.Bin, cfg.Args, cfg.PacedArgs, cfg.SourceBytes = bin, strings.Fields(extra), strings.Fields(paced), sizeKiB<<10
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if floor != "" {
		return scalebench.Floor(ctx, floor, os.Stdout)
	}
	if fairness {
		fair.Bin, fair.Args, fair.Env = cfg.Bin, cfg.Args, cfg.Env
		return scalebench.Fairness(ctx, fair)
	}
	if soak.Duration > 0 {
		soak.Bin, soak.Args, soak.Env, soak.QPS, soak.Burst, soak.Out = cfg.Bin, cfg.Args, cfg.Env, cfg.QPS, cfg.Burst, os.Stdout
		return scalebench.Soak(ctx, soak)
	}
	f, err := scalebench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	f.Print(os.Stdout)
	if jsonOut != "" {
		b, _ := json.MarshalIndent(f, "", "  ")
		return os.WriteFile(jsonOut, b, 0o644)
	}
	return nil
}
