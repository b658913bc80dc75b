package scalebench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/tools/internal/loadtest"
)

// shardNamespace holds the replicas' shard Leases (POD_NAMESPACE).
const shardNamespace = "reloader-system"

// Replica is one replica's share when Config.Replicas run with --shards: the shards it leads
// and the objects its cache holds once balanced, and its memory after sync and at its peak
// while the changes were made.
type Replica struct {
	Name          string
	Shards        int
	Cached        map[string]int
	AfterSync     Memory
	DuringChanges Memory
}

// startReplicas runs cfg.Replicas replicas with --shards=cfg.Shards and waits until each is
// ready and the shards are all led, each replica leading some.
func startReplicas(ctx context.Context, cfg Config, cluster *testenv.Cluster, cl client.Client, timeout time.Duration,
	args []string, kubeconfig string, out io.Writer) ([]*reloader, error) {
	if err := cluster.EnsureNamespace(ctx, cl, shardNamespace); err != nil {
		return nil, err
	}
	var rs []*reloader
	stopAll := func() {
		for _, r := range rs {
			r.p.Stop()
		}
	}
	// All at once, as a Deployment's pods start: one started alone first would take every
	// shard, and cache every object, until the others joined.
	started := make([]*reloader, cfg.Replicas)
	errs := make([]error, cfg.Replicas)
	var wg sync.WaitGroup
	for i := range cfg.Replicas {
		env := append([]string{fmt.Sprintf("POD_NAME=scalebench-%d", i), "POD_NAMESPACE=" + shardNamespace}, cfg.Env...)
		wg.Go(func() {
			started[i], errs[i] = startReloader(ctx, cfg.Bin, timeout, append(slices.Clone(args), "--shards="+strconv.Itoa(cfg.Shards)), env, kubeconfig, out)
		})
	}
	wg.Wait()
	for i := range started {
		if started[i] != nil {
			rs = append(rs, started[i])
		}
	}
	if err := errors.Join(errs...); err != nil {
		stopAll()
		return nil, err
	}
	err := loadtest.Poll(ctx, timeout, func() bool {
		total := 0
		for _, r := range rs {
			n := int(scrape(r, "reloader_shards_owned", ""))
			if n == 0 {
				return false
			}
			total += n
		}
		return total == cfg.Shards
	})
	if err != nil {
		stopAll()
		return nil, fmt.Errorf("%d shards not shared by %d replicas after %s", cfg.Shards, cfg.Replicas, timeout)
	}
	return rs, nil
}

// shares reads each replica's shards and cached objects by kind, and its memory.
func shares(rs []*reloader) []Replica {
	out := make([]Replica, len(rs))
	for i, r := range rs {
		out[i] = Replica{Name: fmt.Sprintf("scalebench-%d", i), Cached: map[string]int{}}
		if text, err := exposition(r.metricsURL); err == nil {
			shards, _ := loadtest.MetricValue(text, "reloader_shards_owned")
			out[i].Shards = int(shards)
			for _, kind := range []string{"ConfigMap", "Secret", "Deployment"} {
				n, _ := loadtest.MetricValueWith(text, "reloader_cached_objects", `kind="`+kind+`"`)
				out[i].Cached[kind] = int(n)
			}
		}
		out[i].AfterSync, _ = r.sample()
	}
	return out
}

// scrape returns the sum of metric's samples whose labels contain label ("" for all) on r's
// metrics address; 0 when it cannot be read.
func scrape(r *reloader, metric, label string) float64 {
	text, err := exposition(r.metricsURL)
	if err != nil {
		return 0
	}
	v, _ := loadtest.MetricValueWith(text, metric, label)
	return v
}
