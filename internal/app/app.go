// Package app builds a reloader controller manager from options. cmd/reloader, the demo and
// the integration tests all start reloader through it.
package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/reloader-operator/reloader/internal/alert"
	"github.com/reloader-operator/reloader/internal/coalesce"
	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/extapi"
	"github.com/reloader-operator/reloader/internal/hashkey"
	"github.com/reloader-operator/reloader/internal/metainfo"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/notify"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/workload"
)

// New returns a manager with a reconciler for every workload kind the options leave in.
func New(ctx context.Context, cfg *rest.Config, opts options.Config, logger logr.Logger) (manager.Manager, error) {
	ignored := opts.IgnoredSources

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
	if !ignored[source.ConfigMap] {
		sources = append(sources, controller.ConfigMaps)
	}
	if !ignored[source.Secret] {
		key, err := hashkey.Setup(ctx, cfg, opts.ReloaderNamespace, opts.Namespaces, logger.WithName("hash-key"))
		if err != nil {
			return nil, err
		}
		sources = append(sources, controller.Secrets(key))
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

	sourceLabels := opts.SourceLabels
	namespaceFilter := opts.NamespaceFilter
	byObject := map[client.Object]cache.ByObject{}
	for _, st := range sources {
		b := cache.ByObject{Transform: st.Transform, Field: and(st.Field, namespaceFilter)}
		if st.Pool == nil {
			b.Label = sourceLabels
		}
		byObject[st.NewObject()] = b
	}
	records, recordCache := controller.ReplacementRecords()
	byObject[records] = recordCache
	var namespaces map[string]cache.Config
	if len(opts.Namespaces) > 0 {
		namespaces = map[string]cache.Config{}
		for _, ns := range opts.Namespaces {
			namespaces[ns] = cache.Config{}
		}
	}

	namespaceLabels := opts.NamespaceLabels
	var lock resourcelock.Interface
	if opts.EnableHA {
		if lock, err = leaseLock(cfg, opts); err != nil {
			return nil, err
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
		Controller:                          config.Controller{SkipNameValidation: ptr.To(true)},
		LeaderElection:                      opts.EnableHA,
		LeaderElectionResourceLockInterface: lock,
		LeaseDuration:                       &opts.LeaseDuration,
		RenewDeadline:                       &opts.LeaseRenewDeadline,
		RetryPeriod:                         &opts.LeaseRetryPeriod,
		LeaderElectionReleaseOnCancel:       true,
	})
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}

	// Register every informer and index now, so that cache sync, and so readiness, covers
	// them all; controllers would otherwise add theirs only once they start.
	m := metrics.New(crmetrics.Registry, opts.MetricsCountByNamespace)
	indexer := mgr.GetFieldIndexer()
	for _, st := range sources {
		if st.Pool != nil {
			if err := controller.IndexPooled(ctx, indexer, st); err != nil {
				return nil, err
			}
		}
		informer, err := mgr.GetCache().GetInformer(ctx, st.NewObject())
		if err != nil {
			return nil, fmt.Errorf("watch %ss: %w", st.Kind, err)
		}
		if _, err := informer.AddEventHandler(st.CountEvents(m.Upstream)); err != nil {
			return nil, err
		}
	}
	if namespaceLabels != nil {
		informer, err := mgr.GetCache().GetInformer(ctx, &corev1.Namespace{})
		if err != nil {
			return nil, fmt.Errorf("watch namespaces for --namespace-selector: %w", err)
		}
		if _, err := informer.AddEventHandler(countNamespaceEvents(m.Upstream)); err != nil {
			return nil, err
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

	window := coalesce.New(opts.CoalesceWindow)
	policy := reload.Policy{Keys: opts.Keys, AutoReloadAll: opts.AutoReloadAll, IgnoredKinds: ignored}
	behaviour := controller.Behaviour{
		Events:               reload.Events{OnCreate: opts.ReloadOnCreate, OnDelete: opts.ReloadOnDelete},
		RunCronJobs:          opts.RunCronJobsOnReload,
		RecreateFinishedJobs: opts.RecreateFinishedJobs,
	}
	alerts, err := newAlerter(opts, m, logger)
	if err != nil {
		return nil, err
	}
	if alerts != nil {
		if err := mgr.Add(alerts); err != nil {
			return nil, err
		}
	}
	var reconcilers []*controller.WorkloadReconciler
	for _, kind := range kinds {
		reconcilers = append(reconcilers, &controller.WorkloadReconciler{
			Client:     mgr.GetClient(),
			Kind:       kind,
			Sources:    sources,
			Policy:     policy,
			Behaviour:  behaviour,
			Strategy:   opts.Strategy,
			Window:     window,
			Recorder:   mgr.GetEventRecorder("reloader"),
			Metrics:    m,
			Alerts:     alerts,
			Namespaces: namespaceLabels,
			Workers:    opts.Workers,
			Now:        time.Now,
		})
	}
	if opts.WebhookURL != "" && len(reconcilers) > 0 {
		// Notify instead of reloading: the reconcilers only find the affected workloads.
		poster, err := notify.NewPoster(opts.WebhookTimeout, opts.WebhookRetries, "")
		if err != nil {
			return nil, err
		}
		hook := &notify.Webhook{URL: opts.WebhookURL, Poster: poster}
		n := &controller.Notifier{Client: mgr.GetClient(), Sources: sources, Workloads: reconcilers,
			Events: behaviour.Events, Send: hook.Send, Metrics: m, Now: time.Now}
		if err := n.SetupWithManager(mgr); err != nil {
			return nil, err
		}
	} else {
		for _, r := range reconcilers {
			if err := r.SetupWithManager(mgr); err != nil {
				return nil, err
			}
		}
	}
	if err := mgr.Add(&metainfo.Publisher{
		Client:    mgr.GetClient(),
		Namespace: opts.ReloaderNamespace,
		Deployment: metainfo.Deployment{Name: opts.ReloaderDeployment, Namespace: opts.ReloaderNamespace,
			Pod: opts.LeaderIdentity},
		Options:    opts.Effective(),
		Log:        logger.WithName("meta-info"),
		FieldOwner: controller.FieldOwner,
	}); err != nil {
		return nil, err
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
			m.CachesSynced.Set(1)
		}
		<-ctx.Done()
		return nil
	})); err != nil {
		return nil, err
	}
	return mgr, nil
}

// newAlerter returns the alert sender the ALERT_* settings ask for, or nil.
func newAlerter(opts options.Config, m *metrics.Metrics, logger logr.Logger) (*alert.Alerter, error) {
	if !opts.Alert.Enabled {
		return nil, nil
	}
	poster, err := notify.NewPoster(opts.WebhookTimeout, opts.WebhookRetries, opts.Alert.Proxy)
	if err != nil {
		return nil, err
	}
	a := alert.New(opts.Alert.Sink, opts.Alert.WebhookURL, opts.Alert.AdditionalInfo, poster, logger.WithName("alert"))
	a.Delivered = m.Notified
	return a, nil
}

// leaseLock is the --enable-ha Lease, held under POD_NAME so that `kubectl get lease` names
// the leader's pod.
func leaseLock(cfg *rest.Config, opts options.Config) (resourcelock.Interface, error) {
	ns := opts.LeaderElectionNamespace
	if ns == "" {
		b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
		if err != nil {
			return nil, errors.New("--enable-ha: set POD_NAMESPACE to the namespace of the leader election Lease")
		}
		ns = strings.TrimSpace(string(b))
	}
	id := opts.LeaderIdentity
	if id == "" {
		host, err := os.Hostname()
		if err != nil {
			return nil, err
		}
		id = host + "_" + string(uuid.NewUUID())
	}
	// A hung request must not outlast the renew deadline.
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = max(opts.LeaseRenewDeadline/2, time.Second)
	cfg = rest.AddUserAgent(cfg, "leader-election")
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	coordination, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return resourcelock.New(resourcelock.LeasesResourceLock, ns, opts.LeaderElectionID, core, coordination,
		resourcelock.ResourceLockConfig{Identity: id})
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

func countNamespaceEvents(u *metrics.Upstream) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { u.EventReceived(metrics.EventAdd, "namespaces") },
		UpdateFunc: func(_, _ any) { u.EventReceived(metrics.EventUpdate, "namespaces") },
		DeleteFunc: func(any) { u.EventReceived(metrics.EventDelete, "namespaces") },
	}
}
