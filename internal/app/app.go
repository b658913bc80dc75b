// Package app builds a reloader controller manager from options. cmd/reloader, the demo and
// the integration tests all start reloader through it.
package app

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/cachemem/intern"
	"github.com/reloader-operator/reloader/internal/controller/rollout"
	"github.com/reloader-operator/reloader/internal/extapi"
	"github.com/reloader-operator/reloader/internal/hashkey"
	"github.com/reloader-operator/reloader/internal/lookup"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/workload"
)

// New returns a manager with a reconciler for every workload kind the options leave in. Each
// step below is a function of its own, in the order the later ones need the earlier ones.
// Each of with adds what it serves beside the reconcilers, from the parts New built (the plan
// webhook is one).
func New(ctx context.Context, cfg *rest.Config, conf options.Config, logger logr.Logger, with ...With) (manager.Manager, error) {
	cfg = withClientRate(cfg, conf)
	scheme, apis, err := schemeAndAPIs(ctx, cfg, conf, logger)
	if err != nil {
		return nil, err
	}
	kinds, read := workloadKinds(conf, apis, logger)
	degraded, err := checkWorkloadAccess(ctx, cfg, conf, kinds, read)
	if err != nil {
		return nil, err
	}
	key, err := installKey(ctx, cfg, conf, kinds, degraded.keyWait(), logger)
	if err != nil {
		return nil, err
	}
	// The caches this manager owns, shared by its reconcilers and cache transforms only: the
	// rules and time zones its decisions parse, and the strings its cached objects repeat.
	parsed, tables := reload.NewCaches(), intern.New()
	sources := sourceTypes(conf, apis, key, logger)
	for i := range sources {
		sources[i].Intern = tables
	}
	configs, err := reloaderConfigs(ctx, cfg, conf, apis, logger)
	if err != nil {
		return nil, err
	}
	if configs == nil {
		// Only a ReloaderConfig's selector reads a source's labels (and a workload's, which
		// cacheOptions drops likewise).
		for i := range sources {
			sources[i].DropLabels = true
		}
	}
	configStatus, err := configStatusWritable(ctx, cfg, conf, configs != nil, logger)
	if err != nil {
		return nil, err
	}

	shards, err := newSharding(ctx, cfg, conf, logger)
	if err != nil {
		return nil, err
	}
	// Made before the cache: the workload cache keeps the status of the rollouts it follows.
	rollouts := &rollout.Rollouts{Deadline: conf.RolloutDeadline, Now: time.Now}
	caches := cacheOptions(conf, sources, read, rollouts, configs != nil, tables)
	if shards != nil {
		caches.NewInformer = shards.filter.NewInformer
	}
	var ready atomic.Bool
	mgr, err := newManager(cfg, conf, scheme, caches, &ready, logger)
	if err != nil {
		return nil, err
	}
	if shards != nil {
		if err := mgr.Add(shards.coordinator); err != nil {
			return nil, err
		}
	}
	m := metrics.New(crmetrics.Registry, conf.MetricsCountByNamespace)
	metrics.RegisterClientLatency()
	metrics.SlimGoCollector(crmetrics.Registry)
	cached, err := degraded.client(mgr, read)
	if err != nil {
		return nil, err
	}
	stores := &lookup.Stores{}
	if err := watch(ctx, mgr, stores, conf, sources, read, configs != nil, m, degraded); err != nil {
		return nil, err
	}
	// The lookups by source read the cache's indexes in place: a List would make a new object
	// to name the informer and copy each workload found into the list, on every source event.
	// (With --namespaces the cache's informers span several namespaces and have no single
	// store: the lookups then List, as before.)
	reader := lookup.Reading{Client: cached, Stores: stores}
	events, err := eventRecorder(ctx, mgr)
	if err != nil {
		return nil, err
	}
	if err := degraded.announce(mgr, conf, read, events, logger); err != nil {
		return nil, err
	}
	baselines, led, err := addReloaders(mgr, reader, conf, sources, kinds, key, configs, configStatus, rollouts, m, shards, events, degraded, parsed, logger)
	if err != nil {
		return nil, err
	}
	if err := addServices(mgr, conf, &ready, m, logger); err != nil {
		return nil, err
	}
	parts := Parts{Manager: mgr, Conf: conf, Sources: sources, Kinds: degraded.watched(kinds), Configs: configs, Caches: parsed,
		Baselines: baselines, Ledger: led, Ready: ready.Load, Shard: shards.ready(), Metrics: m}
	for _, w := range with {
		if err := w(parts); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

// schemeAndAPIs returns the scheme of every kind reloader may read, and which of the
// optional APIs (Argo Rollouts, DeploymentConfigs, the CSI driver) the cluster serves: they
// are looked up once, at start-up.
func schemeAndAPIs(ctx context.Context, cfg *rest.Config, conf options.Config, logger logr.Logger) (*runtime.Scheme, served, error) {
	scheme, err := NewScheme()
	if err != nil {
		return nil, served{}, err
	}
	apis, err := discover(ctx, cfg, scheme, optionalAPIs(conf), discoveryBackoff(), logger)
	if err != nil {
		return nil, served{}, err
	}
	return scheme, apis, nil
}

// installKey starts loading the install's key when something needs it: Secret hashes are
// keyed with it, and Job replacement records are signed with it (see writer/jobreplace/records.go).
// Nil when nothing does.
func installKey(ctx context.Context, cfg *rest.Config, conf options.Config, kinds []workload.Kind, forbiddenFor time.Duration, logger logr.Logger) (*hashkey.Loader, error) {
	if conf.IgnoredSources[source.Secret] && !replacesJobs(conf, kinds) {
		return nil, nil
	}
	return hashkey.Setup(ctx, cfg, hashkey.Options{
		Namespace: conf.ReloaderNamespace, Watched: conf.Namespaces,
		Pod: conf.LeaderIdentity, Deployment: conf.ReloaderDeployment,
		Registry: crmetrics.Registry, ForbiddenFor: forbiddenFor,
	}, logger.WithName("hash-key"))
}

// replacesJobs reports whether some reconciled kind is replaced on reload (Jobs), writing
// replacement records: not with --webhook-url, which writes nothing.
func replacesJobs(conf options.Config, kinds []workload.Kind) bool {
	return conf.WebhookURL == "" && slices.ContainsFunc(kinds, func(k workload.Kind) bool { _, ok := k.(workload.Recreated); return ok })
}

// sourceTypes returns the kinds of source watched: ConfigMaps and Secrets unless
// --resources-to-ignore leaves them out, and CSI mounts when asked for and served. Secrets
// are hashed under the install's key.
func sourceTypes(conf options.Config, apis served, key *hashkey.Loader, logger logr.Logger) []sourcecache.SourceType {
	var sources []sourcecache.SourceType
	if !conf.IgnoredSources[source.ConfigMap] {
		sources = append(sources, sourcecache.ConfigMaps)
	}
	if !conf.IgnoredSources[source.Secret] {
		sources = append(sources, sourcecache.Secrets(key))
	}
	if conf.EnableCSIIntegration {
		if apis.has(&extapi.SecretProviderClassPodStatus{}) {
			sources = append(sources, sourcecache.CSIMounts)
		} else {
			logger.Info("WARNING: --enable-csi-integration is set but the Secrets Store CSI driver's API (secrets-store.csi.x-k8s.io/v1 SecretProviderClassPodStatus) is not installed; CSI secrets are not watched")
		}
	}
	return sources
}

// reloaderConfigs returns the cache of compiled ReloaderConfigs when their API is served and
// reloader may read them, and nil otherwise (an image swap under upstream's chart, a Role
// written before the API): annotations alone apply then, with a warning.
func reloaderConfigs(ctx context.Context, cfg *rest.Config, conf options.Config, apis served, logger logr.Logger) (*reloaderconfig.Cache, error) {
	if !apis.has(&v1alpha1.ReloaderConfig{}) {
		logger.Info("the ReloaderConfig API (reloader.dev/v1alpha1) is not installed; only annotations configure reloads")
		return nil, nil
	}
	ok, err := allowed(ctx, cfg, v1alpha1.GroupVersion.Group, "reloaderconfigs", conf.Namespaces, "list", "watch")
	if err != nil {
		return nil, err
	}
	if !ok {
		logger.Info("WARNING: the ReloaderConfig API is installed but reloader's RBAC does not allow list and watch on reloaderconfigs.reloader.dev; only annotations configure reloads (grant them, as the chart does, to use ReloaderConfigs)")
		return nil, nil
	}
	return &reloaderconfig.Cache{}, nil
}

// configStatusWritable reports whether reloader writes the status of ReloaderConfigs: when it
// reads them, reloads (--webhook-url writes nothing), and its RBAC allows the status patch; a
// Role written before the status existed leaves the rules working, with a warning, instead of
// a status write refused on every change.
func configStatusWritable(ctx context.Context, cfg *rest.Config, conf options.Config, configs bool, logger logr.Logger) (bool, error) {
	if !configs || conf.WebhookURL != "" {
		return false, nil
	}
	ok, err := allowed(ctx, cfg, v1alpha1.GroupVersion.Group, "reloaderconfigs/status", conf.Namespaces, "patch")
	if err == nil && !ok {
		logger.Info("WARNING: reloader's RBAC does not allow patch on reloaderconfigs/status; ReloaderConfigs apply, but their status is not written (grant it, as the chart does)")
	}
	return ok, err
}

// workloadKinds returns the kinds reconciled (options.Config.WorkloadKinds: the built-in
// ones, Rollouts when asked for and served, DeploymentConfigs when served, less
// --ignored-workload-types) and the kinds whose objects are read: a Rollout may run a
// Deployment's template even when Deployments themselves are left alone. internal/rbac
// grants the same kinds.
func workloadKinds(conf options.Config, apis served, logger logr.Logger) (reconciled, read []workload.Kind) {
	reconciled, read = conf.WorkloadKinds(func(k workload.Kind) bool { return apis.has(k.NewObject()) })
	for _, k := range conf.KnownKinds() {
		announceOptional(conf, k, apis.has(k.NewObject()), logger)
	}
	return reconciled, read
}

// announceOptional says what became of an optional kind: asked for but not served, or
// found and watched.
func announceOptional(conf options.Config, k workload.Kind, served bool, logger logr.Logger) {
	want, asked := conf.WantsWorkload(k)
	gv := k.Describe().Resource.GroupVersion()
	switch gate := k.Describe().Gate; {
	case gate == workload.Always || !want:
	case !served && gate == workload.ArgoRollouts:
		logger.Info("WARNING: --is-Argo-Rollouts is set but the " + gv.String() + " " + k.Name() + " API is not installed; " + k.Name() + "s are not watched")
	case !served && asked:
		logger.Info("WARNING: --is-openshift=true is set but the " + gv.String() + " " + k.Name() + " API is not served; " + k.Name() + "s are not watched")
	case served && gate == workload.OpenShift:
		logger.Info("OpenShift " + k.Name() + " API found; watching " + k.Name() + "s")
	}
}

// NewScheme returns the scheme of every kind reloader may read.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := extapi.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return scheme, nil
}
