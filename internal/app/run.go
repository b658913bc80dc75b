package app

import (
	"context"
	"errors"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/reloader-operator/reloader/internal/options"
)

// Run builds the manager as New does and runs it through start (cmd/reloader's, which
// bounds the stop), with one difference: while the API serves ReloaderConfigs but none
// exists in the namespaces watched, none of what they need is started (firstConfig says
// what), and a ReloaderConfig created later stops the manager; Run then builds and starts it
// again, with ReloaderConfigs on. That is a restart of reloader in the same process: changes
// made while it starts again are found as after any restart (each workload's record of the
// sources it was last reloaded for, docs/guarantees.md), and the new ReloaderConfig applies
// from the moment the new caches sync. The replica keeps its name in Leases across it, so it
// does not wait for its own Lease to expire.
func Run(ctx context.Context, cfg *rest.Config, conf options.Config, logger logr.Logger, start func(context.Context, manager.Manager) error, with ...With) error {
	id, err := identity(conf)
	if err != nil {
		return err
	}
	for {
		mgr, err := build(ctx, cfg, conf, logger, buildOptions{lazyConfigs: true, identity: id}, with...)
		if err != nil {
			return err
		}
		if err := start(ctx, mgr); !errors.Is(err, errConfigAppeared) {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		logger.Info("a ReloaderConfig was created: starting again with ReloaderConfigs on")
	}
}
