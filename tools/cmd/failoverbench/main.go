// Command failoverbench measures the hand-over of shards between reloader replicas on a local
// control plane (see tools/internal/failover): a replica stopped (SIGTERM), one joining, one
// killed (SIGKILL), at each size given. `make bench-failover` runs it at 3 replicas x 12
// shards x 12 namespaces and 5 x 64 x 200.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testenv/proc"
	"github.com/reloader-operator/reloader/tools/internal/failover"
)

func main() {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "failoverbench:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	var cfg failover.Config
	var sizes []string
	var extra string
	var gate, verbose bool
	fs := pflag.NewFlagSet("failoverbench", pflag.ContinueOnError)
	fs.StringVar(&cfg.Bin, "reloader", "bin/reloader", "the reloader binary under test")
	fs.StringSliceVar(&sizes, "size", []string{"3x12x12", "5x64x200"}, "replicas x shards x namespaces, one run each")
	fs.DurationVar(&cfg.Lease, "lease", 0, "--leader-election-lease-duration (with --renew, --retry); 0: the binary's defaults, 15s/10s/2s")
	fs.DurationVar(&cfg.Renew, "renew", 10*time.Second, "--leader-election-renew-deadline, with --lease")
	fs.DurationVar(&cfg.Retry, "retry", 2*time.Second, "--leader-election-retry-period, with --lease")
	fs.StringVar(&extra, "reloader-args", "", "more flags for reloader, space-separated")
	fs.BoolVar(&gate, "sharded-list-and-watch", false, "turn the API server's ShardedListAndWatch feature gate on (server-side shard selectors)")
	fs.BoolVarP(&verbose, "verbose", "v", false, "print the replicas' output")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.Args = strings.Fields(extra)
	cfg.Log = func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, a...))
	}
	if verbose {
		cfg.Out = os.Stderr
	} else {
		cfg.Out = &proc.Output{}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	lease := "15s (defaults: renew 10s, retry 2s)"
	if cfg.Lease > 0 {
		lease = fmt.Sprintf("%v (renew %v, retry %v)", cfg.Lease, cfg.Renew, cfg.Retry)
	}
	var report []string
	for _, size := range sizes {
		var n [3]int
		parts := strings.Split(size, "x")
		if len(parts) != 3 {
			return fmt.Errorf("--size %q: want replicas x shards x namespaces, such as 3x12x12", size)
		}
		for k, p := range parts {
			v, err := strconv.Atoi(p)
			if err != nil || v < 1 {
				return fmt.Errorf("--size %q: %q is no count", size, p)
			}
			n[k] = v
		}
		cfg.Replicas, cfg.Shards, cfg.Namespaces = n[0], n[1], n[2]
		cluster, err := testenv.Start(ctx, testenv.Options{APIServerFlags: map[string]string{
			"feature-gates": "ShardedListAndWatch=" + strconv.FormatBool(gate)}})
		if err != nil {
			return err
		}
		cfg.Config, cfg.Kubeconfig = cluster.Config, cluster.Kubeconfig
		head := fmt.Sprintf("%d replicas x %d shards, %d namespaces (a ConfigMap and a Deployment each), lease %s, ShardedListAndWatch=%v:",
			cfg.Replicas, cfg.Shards, cfg.Namespaces, lease, gate)
		cfg.Log("%s", head)
		results, err := failover.Run(ctx, cfg)
		_ = cluster.Stop()
		report = append(report, head)
		for _, r := range results {
			report = append(report, "  "+r.String())
		}
		if err != nil {
			if o, ok := cfg.Out.(*proc.Output); ok {
				fmt.Fprintln(os.Stderr, o.String())
			}
			return fmt.Errorf("%s: %w", size, err)
		}
	}
	fmt.Println(strings.Join(report, "\n"))
	return nil
}
