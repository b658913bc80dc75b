package app

import (
	"context"
	"sync/atomic"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/gcpolicy"
	"github.com/reloader-operator/reloader/internal/metainfo"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/options"
)

// addServices adds what runs beside the reconcilers: the meta-info ConfigMap upstream's
// tooling reads, pprof when asked for, and the readiness flag.
func addServices(mgr manager.Manager, conf options.Config, ready *atomic.Bool, m *metrics.Metrics, logger logr.Logger) error {
	if err := mgr.Add(&metainfo.Publisher{
		Client:    mgr.GetClient(),
		Namespace: conf.ReloaderNamespace,
		Deployment: metainfo.Deployment{Name: conf.ReloaderDeployment, Namespace: conf.ReloaderNamespace,
			Pod: conf.LeaderIdentity},
		Options:    metainfo.OptionsOf(conf.Options),
		Flags:      conf.Effective(),
		Log:        logger.WithName("meta-info"),
		FieldOwner: controller.FieldOwner,
	}); err != nil {
		return err
	}
	if conf.EnablePprof {
		if err := mgr.Add(pprofServer(conf.PprofAddr)); err != nil {
			return err
		}
	}
	// Ready once the caches have synced: every replica, leader or not, so that a follower
	// can take over at once.
	return mgr.Add(everyReplica(func(ctx context.Context) error {
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return nil
		}
		ready.Store(true)
		m.CachesSynced.Set(1)
		// Start-up's larger GC headroom ends; the first list's free heap pages, which the
		// runtime's scavenger would give back only slowly, go back now.
		gcpolicy.Settle()
		return nil
	}))
}

// everyReplica is a runnable that runs on followers too, not only on the leader.
type everyReplica func(ctx context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }
func (everyReplica) NeedLeaderElection() bool          { return false }
