package scalebench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/tools/internal/loadtest"
)

// FairnessConfig is one fairness run: namespace "busy" holds Busy Deployments that all use
// one ConfigMap, namespace "quiet" one Deployment with a ConfigMap of its own. Each try
// changes busy's ConfigMap, then quiet's, and times quiet's reload; once per entry of Rates
// (0: --reload-rate unset).
type FairnessConfig struct {
	Bin   string
	Args  []string
	Env   []string
	Busy  int
	Tries int
	Rates []float64
	// Timeout ends a try whose reload has not come; it counts as a timeout.
	Timeout time.Duration
	Out     io.Writer
}

// Fairness prints, per rate, quiet's reload latency over the tries.
func Fairness(ctx context.Context, cfg FairnessConfig) error {
	cluster, err := testenv.Start(ctx, testenv.Options{})
	if err != nil {
		return err
	}
	defer cluster.Stop()
	admin := rest.CopyConfig(cluster.Config)
	admin.QPS, admin.Burst = 1000, 2000
	cl, err := client.New(admin, client.Options{})
	if err != nil {
		return err
	}
	busy := namespace{name: "busy", deployments: cfg.Busy, configMaps: 1, secrets: 1}
	quiet := namespace{name: "quiet", deployments: 1, configMaps: 1, secrets: 1}
	for _, batch := range objects([]namespace{busy, quiet}, 64) {
		if err := createAll(ctx, cl, batch, 8); err != nil {
			return err
		}
	}
	_, kubeconfig, err := cluster.AddUser(user, "system:masters")
	if err != nil {
		return err
	}
	fmt.Fprintf(cfg.Out, "fairness: %d Deployments in busy use one ConfigMap; quiet has 1; %s\n", cfg.Busy, filepath.Base(cfg.Bin))
	for _, rate := range cfg.Rates {
		args := slices.Clone(cfg.Args)
		if rate > 0 {
			args = append(args, "--reload-rate="+strconv.FormatFloat(rate, 'f', -1, 64))
		}
		lat, timeouts, err := fairnessRun(ctx, cfg, cl, cluster.Dir, kubeconfig, args)
		if err != nil {
			return err
		}
		printLatency(cfg.Out, rate, lat, timeouts, cfg)
	}
	return nil
}

// fairnessRun starts reloader with args, waits for every workload's first record, and runs
// the tries.
func fairnessRun(ctx context.Context, cfg FairnessConfig, cl client.Client, dir, kubeconfig string, args []string) ([]time.Duration, int, error) {
	logFile, err := os.Create(filepath.Join(dir, "reloader.log"))
	if err != nil {
		return nil, 0, err
	}
	defer logFile.Close()
	r, err := startReloader(ctx, cfg.Bin, 5*time.Minute, args, cfg.Env, kubeconfig, logFile)
	if err != nil {
		return nil, 0, err
	}
	defer r.p.Stop()
	if err := loadtest.Poll(ctx, 10*time.Minute, func() bool { return recordedAll(ctx, cl, "busy", cfg.Busy) }); err != nil {
		return nil, 0, fmt.Errorf("first records: %w", err)
	}
	var lat []time.Duration
	timeouts := 0
	for try := range cfg.Tries {
		version := int(time.Now().UnixNano()) + try
		if err := patchData(ctx, cl, "busy", configMapName(0), 64, version); err != nil {
			return nil, 0, err
		}
		// The fan-out is queued (and, paced, waiting for tokens) before quiet's change.
		if err := sleep(ctx, 300*time.Millisecond); err != nil {
			return nil, 0, err
		}
		d, ok, err := timeReload(ctx, cl, cfg.Timeout, version)
		if err != nil {
			return nil, 0, err
		}
		if !ok {
			timeouts++
			d = cfg.Timeout
		}
		lat = append(lat, d)
	}
	return lat, timeouts, nil
}

// timeReload changes quiet's ConfigMap and returns how long until its Deployment's pod
// template changes, as seen by polling every 10 ms; false when it does not within timeout.
func timeReload(ctx context.Context, cl client.Client, timeout time.Duration, version int) (time.Duration, bool, error) {
	key := types.NamespacedName{Namespace: "quiet", Name: deploymentName(0)}
	before, err := templateOf(ctx, cl, key)
	if err != nil {
		return 0, false, err
	}
	start := time.Now()
	if err := patchData(ctx, cl, "quiet", configMapName(0), 64, version); err != nil {
		return 0, false, err
	}
	for time.Since(start) < timeout {
		now, err := templateOf(ctx, cl, key)
		if err != nil {
			return 0, false, err
		}
		if now != before {
			return time.Since(start), true, nil
		}
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return 0, false, err
		}
	}
	return timeout, false, nil
}

func templateOf(ctx context.Context, cl client.Client, key types.NamespacedName) (string, error) {
	d := &appsv1.Deployment{}
	if err := cl.Get(ctx, key, d); err != nil {
		return "", err
	}
	b, err := json.Marshal(d.Spec.Template)
	return string(b), err
}

// recordedAll reports whether reloader has recorded the n Deployments of ns.
func recordedAll(ctx context.Context, cl client.Client, ns string, n int) bool {
	c, err := recordedDeployments(ctx, cl, ns)
	return err == nil && c >= n
}

func printLatency(w io.Writer, rate float64, lat []time.Duration, timeouts int, cfg FairnessConfig) {
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	label := "--reload-rate unset"
	if rate > 0 {
		label = fmt.Sprintf("--reload-rate=%g", rate)
	}
	within := 0
	for _, d := range lat {
		if d <= 2*time.Second {
			within++
		}
	}
	fmt.Fprintf(w, "  %-20s quiet's reload over %d tries: p50 %v  p99 %v  max %v  within 2s %d/%d  timeouts (>%v) %d\n",
		label, len(lat), percentile(sorted, 0.5).Round(time.Millisecond), percentile(sorted, 0.99).Round(time.Millisecond),
		sorted[len(sorted)-1].Round(time.Millisecond), within, len(lat), cfg.Timeout, timeouts)
}
