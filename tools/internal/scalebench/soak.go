package scalebench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/testenv"
)

// SoakConfig is one soak: sustained churn for Duration, memory printed Every.
type SoakConfig struct {
	Bin   string
	Args  []string
	Env   []string
	QPS   float64
	Burst int
	// Workloads Deployments, each with two ConfigMaps and a Secret of its own; Rate updates
	// per second go round all of them.
	Workloads   int
	Rate        float64
	SourceBytes int
	Duration    time.Duration
	Every       time.Duration
	Out         io.Writer
}

// SoakSample is one line of the soak's series.
type SoakSample struct {
	Elapsed time.Duration
	Memory
	Updates int
}

// Soak runs reloader under sustained churn and prints its memory every cfg.Every.
func Soak(ctx context.Context, cfg SoakConfig) error {
	_, err := soak(ctx, cfg, func(s SoakSample) {
		fmt.Fprintf(cfg.Out, "%8s  RSS %7s  heap in use %7s  heap allocated %7s  updates %6d  reloads %6.0f\n",
			s.Elapsed.Round(time.Second), mib(s.RSS), mib(s.HeapInuse), mib(s.HeapAlloc), s.Updates, s.Reloads)
	})
	return err
}

func soak(ctx context.Context, cfg SoakConfig, report func(SoakSample)) ([]SoakSample, error) {
	cluster, err := testenv.Start(ctx, testenv.Options{})
	if err != nil {
		return nil, err
	}
	defer cluster.Stop()
	admin := rest.CopyConfig(cluster.Config)
	admin.QPS, admin.Burst = 1000, 2000
	cl, err := client.New(admin, client.Options{})
	if err != nil {
		return nil, err
	}
	ns := namespace{name: "soak", deployments: cfg.Workloads, configMaps: 2 * cfg.Workloads, secrets: cfg.Workloads}
	for _, batch := range objects([]namespace{ns}, max(cfg.SourceBytes, 64)) {
		if err := createAll(ctx, cl, batch, 8); err != nil {
			return nil, err
		}
	}
	_, kubeconfig, err := cluster.AddUser(user, "system:masters")
	if err != nil {
		return nil, err
	}
	args := slices.Clone(cfg.Args)
	if cfg.QPS > 0 {
		args = append(args, "--kube-api-qps="+strconv.FormatFloat(cfg.QPS, 'f', -1, 64))
	}
	if cfg.Burst > 0 {
		args = append(args, "--kube-api-burst="+strconv.Itoa(cfg.Burst))
	}
	logFile, err := os.Create(filepath.Join(cluster.Dir, "reloader.log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	r, err := startReloader(ctx, cfg.Bin, 5*time.Minute, args, cfg.Env, kubeconfig, logFile)
	if err != nil {
		return nil, err
	}
	defer r.p.Stop()
	fmt.Fprintf(cfg.Out, "soak: %d Deployments, %d ConfigMaps, %d Secrets; %.0f updates/s for %s; reloader %v\n",
		ns.deployments, ns.configMaps, ns.secrets, cfg.Rate, cfg.Duration, args)

	var sources []client.Object
	for i := range ns.configMaps {
		sources = append(sources, configMap(ns.name, configMapName(i), 0))
	}
	for i := range ns.secrets {
		sources = append(sources, secret(ns.name, secretName(i), 0))
	}
	var series []SoakSample
	record := func(start time.Time, updates int) error {
		m, err := r.sample()
		if err != nil {
			return err
		}
		s := SoakSample{Elapsed: time.Since(start), Memory: m, Updates: updates}
		series = append(series, s)
		report(s)
		return nil
	}
	start := time.Now()
	if err := record(start, 0); err != nil {
		return series, err
	}
	tick := time.NewTicker(time.Duration(float64(time.Second) / max(cfg.Rate, 0.1)))
	defer tick.Stop()
	next := start.Add(cfg.Every)
	for updates := 0; time.Since(start) < cfg.Duration; {
		select {
		case <-ctx.Done():
			return series, ctx.Err()
		case <-tick.C:
		}
		o := sources[updates%len(sources)]
		value := strconv.Quote(payload(max(cfg.SourceBytes, 64), updates+1)["config"])
		body := `{"data":{"config":` + value + `}}`
		if _, ok := o.(*corev1.Secret); ok {
			body = `{"stringData":{"config":` + value + `}}`
		}
		if err := cl.Patch(ctx, o, client.RawPatch(types.MergePatchType, []byte(body))); err != nil {
			return series, fmt.Errorf("update %s: %w", o.GetName(), err)
		}
		updates++
		if time.Now().After(next) {
			next = next.Add(cfg.Every)
			if err := record(start, updates); err != nil {
				return series, err
			}
		}
	}
	return series, nil
}
