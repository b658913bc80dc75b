package app

import (
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/reloader-operator/reloader/internal/baseline"
	"github.com/reloader-operator/reloader/internal/ledger"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/workload"
)

// Parts are what New built that a server beside the reconcilers reads: the packages that
// decide as the controller does (explain, and so the plan webhook) import app, so app can't
// import them, and New takes them as With.
type Parts struct {
	Manager manager.Manager
	Conf    options.Config
	// Sources are the source types watched (Secrets hashed under the install's key).
	Sources []sourcecache.SourceType
	// Kinds are the workload kinds reconciled whose objects the cache holds (not those read
	// without watch, in degraded mode).
	Kinds []workload.Kind
	// Configs compiles the ReloaderConfigs; nil when reloader reads none.
	Configs *reloaderconfig.Cache
	// Caches are the manager's memos of parsed annotation values and time zones.
	Caches *reload.Caches
	// Baselines are the reconcilers' notes of the changes their workloads without record
	// missed; nil when nothing reloads (--webhook-url).
	Baselines *baseline.Baselines
	// Ledger is the reconcilers' ledger of first records; nil when they keep none.
	Ledger *ledger.Ledger
	// Ready reports whether the caches have synced.
	Ready func() bool
	// Shard, with --shards, reports whether this replica holds a namespace; nil without.
	Shard func(namespace string) (own, ready bool)
	// Metrics are the reconcilers' collectors (and their Hook).
	Metrics *metrics.Metrics
}

// With adds a runnable built from the Parts to the manager.
type With func(Parts) error
