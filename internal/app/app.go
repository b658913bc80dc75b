// Package app builds a reloader controller manager from options. cmd/reloader, the demo and
// the integration tests all start reloader through it.
package app

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/reloader-operator/reloader/internal/coalesce"
	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/extapi"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/workload"
)

// LeaderElectionID names the Lease replicas compete for with --enable-ha.
const LeaderElectionID = "reloader-leader-election"

// New returns a manager with a reconciler for every workload kind the options leave in.
func New(ctx context.Context, cfg *rest.Config, opts options.Options, logger logr.Logger) (manager.Manager, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	strategy, _ := reload.NewStrategy(opts.ReloadStrategy) // validated above
	ignored := opts.IgnoredSourceKinds()

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := extapi.AddToScheme(scheme); err != nil {
		return nil, err
	}
	// The optional APIs are looked up once, at start-up.
	apis, err := discover(cfg, scheme)
	if err != nil {
		return nil, err
	}

	var sources []controller.SourceType
	for _, st := range []controller.SourceType{controller.ConfigMaps, controller.Secrets} {
		if !ignored[st.Kind] {
			sources = append(sources, st)
		}
	}
	if opts.EnableCSIIntegration {
		if apis.has(&extapi.SecretProviderClassPodStatus{}) {
			sources = append(sources, controller.CSIMounts)
		} else {
			logger.Info("WARNING: --enable-csi-integration is set but the Secrets Store CSI driver's API (secrets-store.csi.x-k8s.io/v1 SecretProviderClassPodStatus) is not installed; CSI secrets are not watched")
		}
	}

	var kinds []workload.Kind
	for _, kind := range workload.Builtin() {
		if !opts.IgnoresWorkload(kind.Name()) {
			kinds = append(kinds, kind)
		}
	}
	if opts.IsArgoRollouts && !opts.IgnoresWorkload("Rollout") {
		if apis.has(&extapi.Rollout{}) {
			kinds = append(kinds, workload.Rollout())
		} else {
			logger.Info("WARNING: --is-Argo-Rollouts is set but the argoproj.io/v1alpha1 Rollout API is not installed; Rollouts are not watched")
		}
	}
	if !opts.IgnoresWorkload("DeploymentConfig") && apis.has(&extapi.DeploymentConfig{}) {
		logger.Info("OpenShift DeploymentConfig API found; watching DeploymentConfigs")
		kinds = append(kinds, workload.DeploymentConfig())
	}
	// The workload kinds whose objects are read: a Rollout may run a Deployment's template
	// even when Deployments themselves are left alone.
	indexed := slices.Clone(kinds)
	if slices.ContainsFunc(kinds, func(k workload.Kind) bool { _, ok := k.(workload.Referencing); return ok }) &&
		!slices.ContainsFunc(kinds, func(k workload.Kind) bool { return k.Name() == "Deployment" }) {
		indexed = append(indexed, workload.Deployment())
	}

	sourceLabels, _ := opts.SourceSelector() // validated above
	namespaceFilter := opts.NamespaceFilter()
	byObject := map[client.Object]cache.ByObject{}
	for _, st := range sources {
		b := cache.ByObject{Transform: st.Transform, Field: and(st.Field, namespaceFilter)}
		if st.Pool == nil {
			b.Label = sourceLabels
		}
		byObject[st.NewObject()] = b
	}
	var namespaces map[string]cache.Config
	if len(opts.Namespaces) > 0 {
		namespaces = map[string]cache.Config{}
		for _, ns := range opts.Namespaces {
			namespaces[ns] = cache.Config{}
		}
	}

	var ready atomic.Bool
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Logger: logger,
		Cache: cache.Options{
			DefaultNamespaces: namespaces,
			ByObject:          byObject,
			DefaultTransform:  cache.TransformStripManagedFields(),
			// Server-side, so ignored namespaces cost neither memory nor events.
			DefaultFieldSelector: namespaceFilter,
			// Never start an informer lazily on a read: every kind reloader reads is watched
			// on purpose, with its own memory limits.
			ReaderFailOnMissingInformer: true,
		},
		Metrics: metricsserver.Options{
			BindAddress: opts.MetricsAddr,
			ExtraHandlers: map[string]http.Handler{
				"/live":  http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }),
				"/ready": readyHandler(&ready),
			},
		},
		HealthProbeBindAddress: "0",
		// Names are unique within one manager anyway; tests run several managers per process.
		Controller:                    config.Controller{SkipNameValidation: ptr.To(true)},
		LeaderElection:                opts.EnableHA,
		LeaderElectionID:              LeaderElectionID,
		LeaderElectionNamespace:       opts.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}

	// Register every informer and index now, so that cache sync, and so readiness, covers
	// them all; controllers would otherwise add theirs only once they start.
	indexer := mgr.GetFieldIndexer()
	for _, st := range sources {
		if st.Pool != nil {
			if err := controller.IndexPooled(ctx, indexer, st); err != nil {
				return nil, err
			}
		}
		if _, err := mgr.GetCache().GetInformer(ctx, st.NewObject()); err != nil {
			return nil, fmt.Errorf("watch %ss: %w", st.Kind, err)
		}
	}
	for _, kind := range indexed {
		if err := controller.IndexWorkloads(ctx, indexer, kind, opts.Keys); err != nil {
			return nil, err
		}
		if _, err := mgr.GetCache().GetInformer(ctx, kind.NewObject()); err != nil {
			return nil, fmt.Errorf("watch %ss: %w", kind.Name(), err)
		}
	}

	m := metrics.New(crmetrics.Registry, opts.MetricsCountByNamespace)
	window := coalesce.New(opts.CoalesceWindow)
	policy := reload.Policy{Keys: opts.Keys, AutoReloadAll: opts.AutoReloadAll, IgnoredKinds: ignored}
	behaviour := controller.Behaviour{
		Events:               reload.Events{OnCreate: opts.ReloadOnCreate, OnDelete: opts.ReloadOnDelete},
		RunCronJobs:          opts.RunCronJobsOnReload,
		RecreateFinishedJobs: opts.RecreateFinishedJobs,
	}
	for _, kind := range kinds {
		r := &controller.WorkloadReconciler{
			Client:    mgr.GetClient(),
			Kind:      kind,
			Sources:   sources,
			Policy:    policy,
			Behaviour: behaviour,
			Strategy:  strategy,
			Window:    window,
			Recorder:  mgr.GetEventRecorder("reloader"),
			Metrics:   m,
			Workers:   opts.Workers,
			Now:       time.Now,
		}
		if err := r.SetupWithManager(mgr); err != nil {
			return nil, err
		}
	}

	if opts.EnablePprof {
		if err := mgr.Add(pprofServer{addr: opts.PprofAddr}); err != nil {
			return nil, err
		}
	}

	// Ready once the caches have synced: every replica, leader or not, so that a follower
	// can take over at once.
	if err := mgr.Add(everyReplica(func(ctx context.Context) error {
		if mgr.GetCache().WaitForCacheSync(ctx) {
			ready.Store(true)
		}
		<-ctx.Done()
		return nil
	})); err != nil {
		return nil, err
	}
	return mgr, nil
}

// and combines field selectors, any of which may be nil.
func and(sels ...fields.Selector) fields.Selector {
	var set []fields.Selector
	for _, s := range sels {
		if s != nil {
			set = append(set, s)
		}
	}
	if len(set) == 0 {
		return nil
	}
	return fields.AndSelectors(set...)
}

func readyHandler(ready *atomic.Bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "caches not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
}

// everyReplica is a runnable that runs on followers too, not only on the leader.
type everyReplica func(ctx context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }
func (everyReplica) NeedLeaderElection() bool          { return false }
