package app

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/pace"
	"github.com/reloader-operator/reloader/internal/shard"
)

// handOverGrace is the longest a shard handed over stays unprocessed before its Lease goes.
const handOverGrace = 250 * time.Millisecond

// sharding is, with --shards, the filter that keeps this replica's cache and reconciles to
// its namespaces, and the coordinator that takes its shards through Leases.
type sharding struct {
	filter      *shard.Filter
	coordinator *shard.Coordinator
	metrics     *shard.Metrics

	mu     sync.Mutex
	pacers []*pace.Pacer
}

// share makes p's rates this replica's share of the install's, by the shards it owns, now
// and as they change.
func (s *sharding) share(p *pace.Pacer) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pacers = append(s.pacers, p)
	p.Share(len(s.filter.Owned()), s.coordinator.Space.Shards())
}

// changed hears the shards owned after each change.
func (s *sharding) changed(owned []int) {
	s.metrics.Owned(owned)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.pacers {
		p.Share(len(owned), s.coordinator.Space.Shards())
	}
}

// ready is the reconcilers' check of a namespace; nil (everything) without sharding.
func (s *sharding) ready() func(string) (bool, bool) {
	if s == nil {
		return nil
	}
	return s.filter.Ready
}

// relisted tells the reconcilers which source adds came with the list of a shard just taken;
// nil without sharding.
func (s *sharding) relisted() func(client.Object) bool {
	if s == nil {
		return nil
	}
	return func(o client.Object) bool { return s.filter.Relisted(o) }
}

// newSharding returns nil unless --shards is above 1. It asks the API server once whether it
// applies shard selectors, and logs the answer: either way the cache holds only the slice.
func newSharding(ctx context.Context, cfg *rest.Config, conf options.Config, logger logr.Logger) (*sharding, error) {
	if conf.Shards <= 1 {
		return nil, nil
	}
	space, err := shard.NewSpace(conf.Shards)
	if err != nil {
		return nil, fmt.Errorf("--shards: %w", err)
	}
	ns, err := leaseNamespace(conf, "--shards")
	if err != nil {
		return nil, err
	}
	id, err := identity(conf)
	if err != nil {
		return nil, err
	}
	leases, err := coordinationv1client.NewForConfig(leaseConfig(cfg, conf, "shard-leases"))
	if err != nil {
		return nil, err
	}
	core, err := corev1client.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), "shard-namespaces"))
	if err != nil {
		return nil, err
	}
	mode, err := shard.Detect(ctx, leases, ns)
	if err != nil {
		return nil, fmt.Errorf("--shards: list the shard Leases in %s: %w", ns, err)
	}
	log := logger.WithName("shard")
	if mode == shard.ServerSide {
		log.Info("the API server applies shard selectors (ShardedListAndWatch): only this replica's namespaces are listed and watched", "mode", mode)
	} else {
		log.Info("the API server ignores shard selectors (feature gate ShardedListAndWatch off): this replica filters its namespaces on arrival, with the same hash", "mode", mode)
	}
	filter := shard.NewFilter(space, mode == shard.ServerSide)
	s := &sharding{filter: filter, metrics: shard.NewMetrics(crmetrics.Registry, filter, mode)}
	s.coordinator = &shard.Coordinator{
		Leases: leases, Namespaces: core, Namespace: ns, Prefix: conf.ShardLeasePrefix, Identity: id, Space: space, Filter: filter,
		LeaseDuration: conf.LeaseDuration, RenewDeadline: conf.LeaseRenewDeadline, RetryPeriod: conf.LeaseRetryPeriod,
		// Reloads are written with the workload's resourceVersion, so a reconcile still in
		// flight at the hand-over cannot roll a workload the next owner rolls too; the grace
		// only lets it end before the Lease goes, and is kept short so that a planned
		// hand-over delays the shard's changes by well under 2 s.
		Grace: min(conf.LeaseRetryPeriod, handOverGrace), Log: log, Changed: s.changed,
	}
	return s, nil
}
