package app

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/cachemem/nsindex"
	"github.com/reloader-operator/reloader/internal/lookup"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/workload"
)

// watch registers every informer and index now, before the manager starts, so that cache
// sync, and so readiness, covers them all; controllers would otherwise add theirs only once
// they start. Upstream's events_received_total counts sources and namespaces as they arrive.
// Kinds read without watch (degraded) get no informer: their index is applied to live lists.
// The stores of the informers indexed, and the ReloaderConfigs', are kept in stores for the
// lookups to read in place.
func watch(ctx context.Context, mgr manager.Manager, stores *lookup.Stores, conf options.Config, sources []sourcecache.SourceType, read []workload.Kind, configs bool, m *metrics.Metrics, degraded *degradedMode) error {
	// Every lookup by index is within a namespace: nsindex keeps one key per value, not two.
	indexer := nsindex.Indexer{Cache: mgr.GetCache(), Kept: stores.Keep}
	for _, st := range sources {
		if st.Pool != nil {
			if err := lookup.IndexPooled(ctx, indexer, st); err != nil {
				return err
			}
		}
		informer, err := mgr.GetCache().GetInformer(ctx, st.NewObject())
		if err != nil {
			return fmt.Errorf("watch %ss: %w", st.Kind, err)
		}
		if _, err := informer.AddEventHandler(st.CountEvents(m.Upstream)); err != nil {
			return err
		}
	}
	if conf.NamespaceLabels != nil {
		informer, err := mgr.GetCache().GetInformer(ctx, &corev1.Namespace{})
		if err != nil {
			return fmt.Errorf("watch namespaces for --namespace-selector: %w", err)
		}
		if _, err := informer.AddEventHandler(countNamespaceEvents(m.Upstream)); err != nil {
			return err
		}
	}
	if configs {
		informer, err := mgr.GetCache().GetInformer(ctx, &v1alpha1.ReloaderConfig{})
		if err != nil {
			return fmt.Errorf("watch ReloaderConfigs: %w", err)
		}
		stores.Keep(&v1alpha1.ReloaderConfig{}, informer)
	}
	for _, kind := range read {
		if degraded.unwatched.Has(kind.Name()) {
			if err := lookup.IndexWorkloads(ctx, degraded.split.Live, kind, conf.Keys); err != nil {
				return err
			}
			continue
		}
		if err := lookup.IndexWorkloads(ctx, indexer, kind, conf.Keys); err != nil {
			return err
		}
		if _, err := mgr.GetCache().GetInformer(ctx, kind.NewObject()); err != nil {
			return fmt.Errorf("watch %ss: %w", kind.Name(), err)
		}
	}
	return nil
}

func countNamespaceEvents(u *metrics.Upstream) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { u.EventReceived(metrics.EventAdd, "namespaces") },
		UpdateFunc: func(_, _ any) { u.EventReceived(metrics.EventUpdate, "namespaces") },
		DeleteFunc: func(any) { u.EventReceived(metrics.EventDelete, "namespaces") },
	}
}
