package app

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/uuid"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/reloader-operator/reloader/internal/cachemem/intern"
	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/controller/rollout"
	"github.com/reloader-operator/reloader/internal/gate/wave"
	"github.com/reloader-operator/reloader/internal/ledger"
	"github.com/reloader-operator/reloader/internal/metricsauth"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/workload"
)

// cacheOptions keeps in memory only what reloader reads: the watched namespaces, less the
// ignored ones (filtered by the API server, so they cost neither memory nor events), sources
// through their own transforms and label selector, workloads slimmed (no status unless its
// rollout is followed, no last-applied copy), the pending Job replacements when Jobs are
// reconciled (no ControllerRevision informer otherwise: see watchReplacements), and no managed
// fields. Without ReloaderConfigs (configs false) the labels of sources and of workloads with
// a rollout go too: only a ReloaderConfig's selector reads them.
func cacheOptions(conf options.Config, sources []sourcecache.SourceType, kinds []workload.Kind, rollouts *rollout.Rollouts, configs bool, tables *intern.Tables) cache.Options {
	byObject := map[client.Object]cache.ByObject{}
	for _, st := range sources {
		b := cache.ByObject{Transform: st.Transform, Field: and(st.Field, conf.NamespaceFilter)}
		if st.Pool == nil {
			b.Label = conf.SourceLabels
		}
		if st.Kind == source.ConfigMap {
			// The ledger's ConfigMaps (reloader's own, in its namespace) are no source: the
			// API server leaves them out, so a ledger write costs the source cache nothing.
			b.Label = notLedger(b.Label)
		}
		byObject[st.NewObject()] = b
	}
	for _, kind := range kinds {
		keep := rollouts.Follows(kind)
		if wave.KeepStatus(conf.WavesMinWorkloads) {
			// Waves read the members' statuses on every gate (gate/wave).
			keep = func(client.Object) bool { return true }
		}
		byObject[kind.NewObject()] = cache.ByObject{Transform: workload.SlimTransform(kind, keep, !configs, tables)}
	}
	if slices.ContainsFunc(kinds, func(k workload.Kind) bool { _, ok := k.(workload.Recreated); return ok }) {
		records, recordCache := controller.ReplacementRecords()
		byObject[records] = recordCache
	}
	var namespaces map[string]cache.Config
	if len(conf.Namespaces) > 0 {
		namespaces = map[string]cache.Config{}
		for _, ns := range conf.Namespaces {
			namespaces[ns] = cache.Config{}
		}
	}
	return cache.Options{
		DefaultNamespaces:    namespaces,
		ByObject:             byObject,
		DefaultTransform:     cache.TransformStripManagedFields(),
		DefaultFieldSelector: conf.NamespaceFilter,
		// Never start an informer lazily on a read: every kind reloader reads is watched
		// on purpose, with its own memory limits.
		ReaderFailOnMissingInformer: true,
	}
}

// withClientRate returns cfg with reloader's request rate (--kube-api-qps, --kube-api-burst).
// Every client built from it (cache, writes, Events) gets its own token bucket of that size.
func withClientRate(cfg *rest.Config, conf options.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = float32(conf.KubeAPIQPS)
	cfg.Burst = conf.KubeAPIBurst
	cfg.RateLimiter = nil
	return cfg
}

// newManager returns the manager: its cache, the metrics port, the probes (probes.go: ready
// once the caches have synced), and with --enable-ha the Lease that elects the leader.
func newManager(cfg *rest.Config, conf options.Config, scheme *runtime.Scheme, caches cache.Options, ready *atomic.Bool, logger logr.Logger) (manager.Manager, error) {
	var lock resourcelock.Interface
	if conf.EnableHA {
		var err error
		if lock, err = leaseLock(cfg, conf); err != nil {
			return nil, err
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Logger:  logger,
		Cache:   caches,
		Metrics: metricsOptions(conf, ready),
		// No controller-runtime probe server: it serves one path each, and the probes have
		// two names (probes.go).
		HealthProbeBindAddress: "0",
		// Names are unique within one manager anyway; tests run several managers per process.
		Controller:                          config.Controller{SkipNameValidation: ptr.To(true)},
		LeaderElection:                      conf.EnableHA,
		LeaderElectionResourceLockInterface: lock,
		LeaseDuration:                       &conf.LeaseDuration,
		RenewDeadline:                       &conf.LeaseRenewDeadline,
		RetryPeriod:                         &conf.LeaseRetryPeriod,
		LeaderElectionReleaseOnCancel:       conf.LeaseReleaseOnCancel,
	})
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	if err := addProbeServers(mgr, conf, ready, logger); err != nil {
		return nil, err
	}
	return mgr, nil
}

// metricsOptions serves /metrics, with --metrics-secure over HTTPS (a self-signed
// certificate) to callers the API server authenticates and authorizes; the probes are served
// beside it unless --health-addr gives them their own port.
func metricsOptions(conf options.Config, ready *atomic.Bool) metricsserver.Options {
	o := metricsserver.Options{BindAddress: conf.MetricsAddr}
	if conf.HealthAddr == "" {
		o.ExtraHandlers = probeHandlers(ready)
	}
	if conf.MetricsSecure {
		o.SecureServing = true
		o.FilterProvider = metricsauth.Filter
	}
	// /metrics answers uncompressed: gzip made each scrape build a deflate state of a few
	// hundred KB and compress the body, more CPU and garbage than a scrape inside the cluster
	// saves in bytes (the load test's U1 scrapes once a second: a third of what reloader
	// allocated).
	o.HandlerOpts = append(o.HandlerOpts, func(h *promhttp.HandlerOpts) { h.DisableCompression = true })
	return o
}

func liveHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
}

// leaseLock is the --enable-ha Lease, held under POD_NAME so that `kubectl get lease` names
// the leader's pod.
func leaseLock(cfg *rest.Config, conf options.Config) (resourcelock.Interface, error) {
	ns, err := leaseNamespace(conf, "--enable-ha")
	if err != nil {
		return nil, err
	}
	id, err := identity(conf)
	if err != nil {
		return nil, err
	}
	cfg = leaseConfig(cfg, conf, "leader-election")
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	coordination, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return resourcelock.New(resourcelock.LeasesResourceLock, ns, conf.LeaderElectionID, core, coordination,
		resourcelock.ResourceLockConfig{Identity: id})
}

// leaseConfig is cfg for the Lease clients of --enable-ha and --shards: a hung request must
// not outlast the renew deadline.
func leaseConfig(cfg *rest.Config, conf options.Config, agent string) *rest.Config {
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), agent)
	cfg.Timeout = max(conf.LeaseRenewDeadline/2, time.Second)
	return cfg
}

// leaseNamespace is where the Leases of --enable-ha and --shards live: POD_NAMESPACE, else
// the namespace of the pod's service account.
func leaseNamespace(conf options.Config, flag string) (string, error) {
	if ns := conf.LeaderElectionNamespace; ns != "" {
		return ns, nil
	}
	b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		return "", fmt.Errorf("%s: set POD_NAMESPACE to the namespace of the Leases", flag)
	}
	return strings.TrimSpace(string(b)), nil
}

// identity names this replica in Leases: POD_NAME, else the host name with a unique suffix.
func identity(conf options.Config) (string, error) {
	if conf.LeaderIdentity != "" {
		return conf.LeaderIdentity, nil
	}
	host, err := os.Hostname()
	if err != nil {
		return "", err
	}
	return host + "_" + string(uuid.NewUUID()), nil
}

// notLedger is sel (nil: every object) without the ledger's ConfigMaps.
func notLedger(sel labels.Selector) labels.Selector {
	if sel == nil {
		sel = labels.Everything()
	}
	r, err := labels.NewRequirement(ledger.Label, selection.DoesNotExist, nil)
	if err != nil {
		panic(err) // a constant key: valid
	}
	return sel.Add(*r)
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
