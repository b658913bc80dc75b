// Package options holds reloader's command-line options, with upstream Reloader's flag and
// environment variable names so that existing installs keep working. Load and Parse check
// them once, at start-up, and turn them into a typed Config that the rest of reloader reads.
package options

import (
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/reloader-operator/reloader/internal/approval"
	"github.com/reloader-operator/reloader/internal/flap"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/waves"
	"github.com/reloader-operator/reloader/internal/workload"
)

// Options configure one reloader process.
type Options struct {
	Kubeconfig string
	// KubeAPIQPS and KubeAPIBurst bound reloader's requests to the API server (rest.Config
	// QPS and Burst): a reload of one ConfigMap used by 1,000 Deployments is 1,000 patches.
	KubeAPIQPS   float64
	KubeAPIBurst int

	ReloadStrategy   string
	AutoReloadAll    bool
	ReloadOnCreate   bool
	ReloadOnDelete   bool
	SyncAfterRestart bool

	ResourcesToIgnore    []string
	IgnoredWorkloadTypes []string
	// Kinds are the workload kinds reloader knows (their descriptions): the values
	// --ignored-workload-types accepts, and, through Config, the kinds reconciled and the RBAC
	// they need. Nil: workload.Known(); a test may add a kind of its own.
	Kinds                 workload.Catalog
	Namespaces            []string
	NamespacesToIgnore    []string
	NamespaceSelector     string
	ResourceLabelSelector string

	WebhookURL     string
	IsArgoRollouts bool
	// IsOpenShift is --is-openshift: auto (DeploymentConfigs watched when their API is
	// served), true (asked for; a warning when not served) or false (never watched).
	IsOpenShift          string
	EnableHA             bool
	EnableCSIIntegration bool
	// EnableEvictStrategy runs reloader.dev/restart-strategy: evict (and needs its RBAC).
	EnableEvictStrategy bool
	EnablePprof         bool
	PprofAddr           string

	LogFormat   string
	LogLevel    string
	MetricsAddr string
	// MetricsSecure serves /metrics over HTTPS to callers the API server authenticates
	// (TokenReview) and authorizes (SubjectAccessReview: get on the path /metrics).
	MetricsSecure bool
	// HealthAddr serves /live and /ready on their own plain HTTP address; empty: on the
	// metrics port, unless MetricsSecure, where the kubelet's probes could not authenticate.
	HealthAddr string
	// V2HealthAddr is where upstream v2's chart probes (/healthz, /readyz): when --health-addr
	// is not given the probes are served there too, as long as the port is free (best effort:
	// several reloaders, or upstream v2 beside this one, may share a host); "0" or empty: not.
	V2HealthAddr string
	// PlanWebhookAddr serves the plan admission webhook (internal/planwebhook) over TLS on
	// every replica; empty: off. PlanWebhookCertDir holds its tls.crt and tls.key, re-read
	// when they change.
	PlanWebhookAddr    string
	PlanWebhookCertDir string
	// PlanWebhookClientAuth is how the webhook knows its caller is the API server (cert,
	// token or none; options/planwebhook.go), PlanWebhookClientCA the CA file of cert and
	// PlanWebhookClientNames the names a client certificate must carry (empty: any).
	PlanWebhookClientAuth  string
	PlanWebhookClientCA    string
	PlanWebhookClientNames []string

	// RunCronJobsOnReload also starts a Job when a CronJob reloads.
	RunCronJobsOnReload bool
	// RecreateFinishedJobs also replaces Jobs that have completed or failed.
	RecreateFinishedJobs bool

	// CoalesceWindow is how long a workload's sources must be quiet before it reloads.
	CoalesceWindow time.Duration
	// ReloadRate caps reloads per second across this replica (0: no cap), ReloadBurst at once;
	// with Shards, across the install (each replica takes its share, pace.Pacer.Share).
	ReloadRate  float64
	ReloadBurst int
	// FirstSightRate caps the first records of workloads per second when ReloadRate is 0.
	FirstSightRate float64
	// FirstRecordLedger keeps first records in a ConfigMap per namespace in reloader's own
	// namespace (internal/ledger) instead of patching each workload.
	FirstRecordLedger bool
	// MinReloadInterval is the least time between two reloads of one workload, by default.
	MinReloadInterval time.Duration
	// FlapMaxChanges, FlapWindow and FlapQuiet are the flap breaker's limits (flap.Limits).
	FlapMaxChanges int
	FlapWindow     time.Duration
	FlapQuiet      time.Duration
	// Mode is how a due reload is carried out where no annotation says: reload, notify or
	// approve (approval.Mode).
	Mode string
	// GenericTargetKinds are the kinds ReloaderConfig generic targets may be of ("group/Kind",
	// "*": any namespaced kind); empty: none.
	GenericTargetKinds []string
	// WavesMinWorkloads turns on health-gated waves for a source change that concerns at
	// least this many workloads (internal/waves); 0: only for sources annotated
	// reloader.dev/waves.
	WavesMinWorkloads int
	Workers           int
	// ReconcileTimeout bounds one reconcile of a workload, so that a hung API call frees its
	// worker.
	ReconcileTimeout time.Duration
	// RolloutDeadline is how long a rollout followed after a reload may show no progress
	// before it counts as stalled, for kinds that keep no deadline of their own.
	RolloutDeadline time.Duration

	MetricsCountByNamespace bool
	// Warnings are environment values upstream tolerates and reloader reads as upstream does,
	// logged at start-up so that they are seen without stopping an install that worked.
	Warnings []string
	// LeaderElectionNamespace holds the --enable-ha Lease: POD_NAMESPACE, as upstream's chart
	// sets it; empty means controller-runtime's default, the in-cluster namespace.
	LeaderElectionNamespace string
	// LeaderElectionID names the Lease.
	LeaderElectionID string
	// LeaderIdentity is this replica's name in the Lease: POD_NAME, else the host name.
	LeaderIdentity     string
	LeaseDuration      time.Duration
	LeaseRenewDeadline time.Duration
	LeaseRetryPeriod   time.Duration
	// LeaseReleaseOnCancel gives the Lease up when reloader stops, so a follower takes over
	// at once instead of after the lease duration.
	LeaseReleaseOnCancel bool
	// Shards splits the namespaces among replicas (more than 1 turns sharding on); each
	// replica takes its share of them through Leases named ShardLeasePrefix-<i>.
	Shards             int
	ShardLeasePrefix   string
	WebhookTimeout     time.Duration
	WebhookRetries     int
	ReloaderNamespace  string
	ReloaderDeployment string
	Alert              Alert

	Keys reload.Keys
}

// Default returns the options a bare `reloader` runs with.
func Default() Options {
	return Options{
		ReloadStrategy: reload.StrategyEnvVars,
		KubeAPIQPS:     200,
		// Generic targets are confined to their config's namespace and to namespaced kinds, and
		// patched only where reloader's RBAC grants it (the admin grants each kind): any such
		// kind by default keeps the targets written before the flag working.
		GenericTargetKinds: []string{"*"},
		// A fan-out of one source to 1,000 workloads is 1,000 patches: the burst lets them go as
		// fast as the workers write them; the sustained rate stays at the QPS.
		KubeAPIBurst:       1000,
		PprofAddr:          DefaultPprofAddr,
		PlanWebhookCertDir: DefaultPlanWebhookCertDir,
		LogLevel:           "info",
		MetricsAddr:        ":9090",
		V2HealthAddr:       DefaultV2HealthAddr,
		CoalesceWindow:     300 * time.Millisecond,
		ReloadBurst:        10,
		FlapMaxChanges:     flap.Defaults().MaxChanges,
		FlapWindow:         flap.Defaults().Window,
		FlapQuiet:          flap.Defaults().Quiet,
		Mode:               string(approval.Reload),
		// A write budget for the install: first records cost a patch each, which upstream
		// does not write; 20/s keeps 2,000 new workloads under 2 minutes.
		FirstSightRate: 20,
		// One write per namespace at install, and no write to a workload reloader has not
		// reloaded (internal/ledger).
		FirstRecordLedger: true,
		// A reconcile's time is mostly its write's round trip to the API server: 16 keep a
		// fan-out's patches going while each waits for its answer.
		Workers: 16,
		// Far above a reconcile's few API calls, each bounded by the client's own retries.
		ReconcileTimeout: 2 * time.Minute,
		// As a Deployment's default progressDeadlineSeconds.
		RolloutDeadline: 10 * time.Minute,
		Keys:            reload.DefaultKeys(),
		// Upstream re-runs a finished Job whose config changed; its users opted in to that.
		RecreateFinishedJobs: true,

		// Upstream's Lease name: during a rolling switch with --enable-ha, an upstream
		// leader and a reloader leader hold the same Lease, so they never reload at once.
		LeaderElectionID:   DefaultLeaderElectionID,
		LeaseDuration:      15 * time.Second,
		LeaseRenewDeadline: 10 * time.Second,
		LeaseRetryPeriod:   2 * time.Second,
		// As upstream's v2 and controller-runtime's usual choice.
		LeaseReleaseOnCancel: true,
		IsOpenShift:          OpenShiftAuto,
		ShardLeasePrefix:     "reloader-shard",
		WebhookTimeout:       10 * time.Second,
		WebhookRetries:       3,

		// The plan webhook answers the API server alone, known by its client certificate.
		PlanWebhookClientAuth: PlanWebhookClientCert,
	}
}

// DefaultPprofAddr is loopback only: profiles hold memory contents, so they are read through
// `kubectl port-forward`, never from the pod network.
const DefaultPprofAddr = "127.0.0.1:6060"

// DefaultSecureHealthAddr serves the probes with --metrics-secure when --health-addr is not
// given: the kubelet probes without credentials, so they can't share the metrics port.
const DefaultSecureHealthAddr = ":8081"

// DefaultV2HealthAddr is upstream v2's --health-addr default, where its chart's probes go.
const DefaultV2HealthAddr = ":8080"

// DefaultLeaderElectionID is the Lease upstream Reloader's replicas hold.
const DefaultLeaderElectionID = "stakater-reloader-lock"

// OpenShiftAuto is --is-openshift's default: DeploymentConfigs are watched when the cluster
// serves apps.openshift.io/v1 DeploymentConfigs.
const OpenShiftAuto = "auto"

// flagAliases are other names upstream's releases gave a flag: v2's and its tests' spellings
// of --is-Argo-Rollouts.
var flagAliases = map[string]string{
	"enable-argo-rollouts": "is-Argo-Rollouts",
	"is-argo-rollouts":     "is-Argo-Rollouts",
}

// normalizeFlag maps an alias to the flag's own name.
func normalizeFlag(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	if to, ok := flagAliases[name]; ok {
		return pflag.NormalizedName(to)
	}
	return pflag.NormalizedName(name)
}

// BindFlags registers every flag on fs, writing into o.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.SetNormalizeFunc(normalizeFlag)
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "path to a kubeconfig; default: $KUBECONFIG, in-cluster config, then ~/.kube/config")
	fs.Float64Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "requests per second reloader may send to the API server, sustained (client-go's default is 5)")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "requests reloader may send to the API server at once, above --kube-api-qps; at least --kube-api-qps")
	fs.StringVar(&o.ReloadStrategy, "reload-strategy", o.ReloadStrategy, "how a reload changes the pod template: env-vars or annotations")
	fs.BoolVar(&o.AutoReloadAll, "auto-reload-all", o.AutoReloadAll, "reload every workload on change of the sources it references, unless it says auto: \"false\"")
	fs.BoolVar(&o.ReloadOnCreate, "reload-on-create", o.ReloadOnCreate, "also reload when a referenced source is created")
	fs.BoolVar(&o.ReloadOnDelete, "reload-on-delete", o.ReloadOnDelete, "also reload when a referenced source is deleted")
	fs.BoolVar(&o.SyncAfterRestart, "sync-after-restart", o.SyncAfterRestart, "accepted for compatibility: changes made while reloader was down are always caught up")
	fs.StringSliceVar(&o.ResourcesToIgnore, "resources-to-ignore", o.ResourcesToIgnore, "source kinds to neither watch nor react to: configMaps or secrets")
	fs.StringSliceVar(&o.IgnoredWorkloadTypes, "ignored-workload-types", o.IgnoredWorkloadTypes, "workload kinds to leave alone: "+strings.Join(o.KnownKinds().Plurals(), ", ")+" (singular or plural, any case)")
	fs.StringSliceVar(&o.Namespaces, "namespaces", o.Namespaces, "namespaces to watch (default: all, or $KUBERNETES_NAMESPACE)")
	fs.StringSliceVar(&o.NamespacesToIgnore, "namespaces-to-ignore", o.NamespacesToIgnore, "namespaces to leave alone")
	fs.Var(&selectorFlag{s: &o.NamespaceSelector}, "namespace-selector", "label selector of the namespaces to watch: key=value, key:value, key=*, key:* or *; comma-separated or repeated")
	fs.Var(&selectorFlag{s: &o.ResourceLabelSelector}, "resource-label-selector", "label selector of the ConfigMaps and Secrets to watch: key=value, key:value, key=* or key:*; comma-separated or repeated")
	fs.StringVar(&o.WebhookURL, "webhook-url", o.WebhookURL, "POST a notification to this URL instead of reloading; env "+WebhookURLEnv+" (e.g. from a Secret) keeps the URL, a token, off the command line")
	fs.BoolVar(&o.IsArgoRollouts, "is-Argo-Rollouts", o.IsArgoRollouts, "also reload Argo Rollouts, if their API is installed (also spelt --enable-argo-rollouts, --is-argo-rollouts)")
	fs.StringVar(&o.IsOpenShift, "is-openshift", o.IsOpenShift, "reload OpenShift DeploymentConfigs: auto (when the cluster serves apps.openshift.io/v1 DeploymentConfigs), true or false")
	fs.BoolVar(&o.EnableHA, "enable-ha", o.EnableHA, "run several replicas; a Lease elects the one that reloads")
	fs.BoolVar(&o.EnableCSIIntegration, "enable-csi-integration", o.EnableCSIIntegration, "reload on Secrets Store CSI driver secret rotation")
	fs.BoolVar(&o.EnableEvictStrategy, "enable-evict-strategy", o.EnableEvictStrategy, "restart workloads annotated reloader.dev/restart-strategy: evict by evicting their pods one at a time (needs list pods and replicasets, create pods/eviction)")
	fs.BoolVar(&o.EnablePprof, "enable-pprof", o.EnablePprof, "serve pprof on --pprof-addr (without /debug/pprof/cmdline, which would show the flags)")
	fs.StringVar(&o.PprofAddr, "pprof-addr", o.PprofAddr, "address of the pprof server; the default is loopback only (reach it with kubectl port-forward)")
	fs.StringVar(&o.LogFormat, "log-format", o.LogFormat, "log format: json, or empty for text")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "log level: "+strings.Join(LogLevels, ", "))
	fs.StringVar(&o.MetricsAddr, "metrics-addr", o.MetricsAddr, "address of /metrics, and of the probes (/live, /ready, /healthz, /readyz) unless --health-addr moves them; 0 turns it off")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure, "serve /metrics over HTTPS, only to callers allowed get on the non-resource URL /metrics (checked with TokenReview and SubjectAccessReview); the probes move to --health-addr")
	fs.StringVar(&o.HealthAddr, "health-addr", o.HealthAddr, "address of the probes (/live and /healthz: alive; /ready and /readyz: caches synced) over plain HTTP, and only there; 0 turns them off; not given: the metrics port (or "+DefaultSecureHealthAddr+" with --metrics-secure), plus --v2-health-addr")
	fs.StringVar(&o.V2HealthAddr, "v2-health-addr", o.V2HealthAddr, "when --health-addr is not given, the probes are also served here, where upstream v2's chart probes (GET /healthz, /readyz on port 8080), if the port is free: a busy port is a warning, not an error; 0 turns it off")
	o.bindPlanWebhookFlags(fs)
	fs.BoolVar(&o.RunCronJobsOnReload, "run-cronjobs-on-reload", o.RunCronJobsOnReload, "when a CronJob reloads, also start a Job from it at once, as upstream does (per CronJob: annotation "+reload.RunOnReloadAnnotation+")")
	fs.BoolVar(&o.RecreateFinishedJobs, "recreate-finished-jobs", o.RecreateFinishedJobs, "also replace Jobs that have completed or failed when their config changes, as upstream does; =false leaves finished Jobs alone (per Job: annotation "+reload.RecreateFinishedAnnotation+": \"false\" or \"true\")")
	fs.DurationVar(&o.CoalesceWindow, "coalesce-window", o.CoalesceWindow, "wait until a workload's sources have been quiet this long, so changes landing together reload once; 0 turns it off")
	fs.Float64Var(&o.ReloadRate, "reload-rate", o.ReloadRate, "reloads per second across this replica (with --shards: across the install, each replica taking its share by the shards it owns), so that a change used by many workloads rolls them spread out; 0 turns it off")
	fs.IntVar(&o.ReloadBurst, "reload-burst", o.ReloadBurst, "reloads at once before --reload-rate spreads them")
	fs.Float64Var(&o.FirstSightRate, "first-sight-rate", o.FirstSightRate, "first records of workloads per second when --reload-rate is 0 (with it, first records take the tokens reloads leave; with --shards: across the install, as --reload-rate); 0 turns it off")
	fs.BoolVar(&o.FirstRecordLedger, "first-record-ledger", o.FirstRecordLedger, "keep first records of workloads in a ConfigMap per namespace in reloader's own namespace, written once a second within --first-sight-rate, instead of patching each workload; false patches each workload")
	fs.IntVar(&o.FlapMaxChanges, "flap-max-changes", o.FlapMaxChanges, "flap breaker: a source changed in more bursts than this within --flap-window (or oscillating, or written alternately by different field managers) is quarantined: its reloads wait until it is quiet for --flap-quiet, or an operator releases it (per source: annotation "+flap.MaxChangesAnnotation+"); 0 turns the breaker off")
	fs.DurationVar(&o.FlapWindow, "flap-window", o.FlapWindow, "flap breaker: how far back a source's changes count (per source: annotation "+flap.WindowAnnotation+")")
	fs.DurationVar(&o.FlapQuiet, "flap-quiet", o.FlapQuiet, "flap breaker: how long a quarantined source must go without change before its workloads reload, once, on its latest content (per source: annotation "+flap.QuietAnnotation+")")
	fs.StringSliceVar(&o.GenericTargetKinds, "generic-target-kinds", o.GenericTargetKinds, "kinds that ReloaderConfig generic targets may be of, as group/Kind (core group: Kind), or * (the default) for any namespaced kind reloader may get and patch; a target is always in its config's namespace, and reloader patches it with its own rights; empty: generic targets are refused")
	fs.StringVar(&o.Mode, "mode", o.Mode, "how a due reload is carried out: reload (roll the workload), notify (report it: Event ReloadNotified, alert, metric; nothing restarts, the new hashes are recorded) or approve (hold it until the approve command names its content); per workload or per source: annotation "+approval.ModeAnnotation)
	fs.IntVar(&o.WavesMinWorkloads, "waves-min-workloads", o.WavesMinWorkloads, "health-gated waves: a change of a ConfigMap or Secret that concerns at least this many workloads rolls them in waves (a canary, then 2, 4, 8, ...), each wave once the one before completed its rollout, halted by a stalled one; 0 (default): only sources annotated "+waves.Annotation+"=true roll in waves")
	fs.DurationVar(&o.MinReloadInterval, "min-reload-interval", o.MinReloadInterval, "least time between two reloads of one workload; changes within it roll when it ends (per workload: annotation "+reload.MinReloadIntervalAnnotation+"); 0 turns it off")
	fs.IntVar(&o.Workers, "workers", o.Workers, "workloads of one kind reconciled at once")
	fs.DurationVar(&o.ReconcileTimeout, "reconcile-timeout", o.ReconcileTimeout, "longest one reconcile of a workload may take; one past it is cancelled and retried with backoff, so that a hung API call frees its worker")
	fs.DurationVar(&o.RolloutDeadline, "rollout-deadline", o.RolloutDeadline, "after a reload, a rollout that shows no progress this long counts as stalled (Event RolloutStalled); Deployments and Argo Rollouts use their own progressDeadlineSeconds instead")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "name of the Lease replicas compete for with --enable-ha")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "namespace of the Leases of --enable-ha and --shards (default: $POD_NAMESPACE, else the pod's own)")
	fs.DurationVar(&o.LeaseDuration, "leader-election-lease-duration", o.LeaseDuration, "how long followers wait before taking over from a leader that stopped renewing; whole seconds, longer than the renew deadline")
	fs.DurationVar(&o.LeaseRenewDeadline, "leader-election-renew-deadline", o.LeaseRenewDeadline, "how long the leader retries renewing before it gives up leadership; longer than 1.2 times the retry period")
	fs.DurationVar(&o.LeaseRetryPeriod, "leader-election-retry-period", o.LeaseRetryPeriod, "how often replicas try to acquire or renew the Lease")
	fs.BoolVar(&o.LeaseReleaseOnCancel, "leader-election-release-on-cancel", o.LeaseReleaseOnCancel, "give the Lease up on a clean stop, so that a follower takes over at once")
	fs.IntVar(&o.Shards, "shards", o.Shards, "split the namespaces into this many shards that the replicas share through Leases (each replica reloads only its own namespaces); 0 or 1: off")
	fs.StringVar(&o.ShardLeasePrefix, "shard-lease-prefix", o.ShardLeasePrefix, "name prefix of the Leases of --shards, in the leader election namespace")
	fs.DurationVar(&o.WebhookTimeout, "webhook-timeout", o.WebhookTimeout, "timeout of one --webhook-url or alert request")
	fs.IntVar(&o.WebhookRetries, "webhook-retries", o.WebhookRetries, "attempts per --webhook-url notification or alert, at least 1; a failed notification is then requeued with backoff")
	o.bindAlertFlags(fs)

	k := &o.Keys
	fs.StringVar(&k.Auto, "auto-annotation", k.Auto, "annotation: reload on change of any referenced source")
	fs.StringVar(&k.Search, "auto-search-annotation", k.Search, "annotation: reload on change of referenced sources that carry the match annotation")
	fs.StringVar(&k.Match, "search-match-annotation", k.Match, "source annotation that opts in to search")
	fs.StringVar(&k.Ignore, "ignore-annotation", k.Ignore, "source annotation whose changes never reload")
	fs.StringVar(&k.PausePeriod, "pause-deployment-annotation", k.PausePeriod, "annotation: pause a Deployment this long after a reload")
	fs.StringVar(&k.PausedAt, "pause-deployment-time-annotation", k.PausedAt, "annotation written while a Deployment is paused")
	fs.StringVar(&k.RolloutStrategy, "rollout-strategy-annotation", k.RolloutStrategy, "annotation: how an Argo Rollout reloads, rollout or restart")
	for _, kind := range source.Kinds {
		name := string(kind)
		plural := name + "s"
		if strings.HasSuffix(name, "s") {
			plural = name + "es"
		}
		fs.Var(mapEntry{k.Reload, kind}, name+"-annotation", "annotation: comma-separated names or regular expressions of "+plural+" to reload on")
		fs.Var(mapEntry{k.TypedAuto, kind}, name+"-auto-annotation", "annotation: reload on change of any referenced "+name)
		fs.Var(mapEntry{k.Exclude, kind}, name+"-exclude-annotation", "annotation: "+plural+" that never reload this workload")
	}
}

// mapEntry is a flag that sets one entry of a map of annotation keys.
type mapEntry struct {
	m map[source.Kind]string
	k source.Kind
}

func (e mapEntry) String() string {
	if e.m == nil {
		return ""
	}
	return e.m[e.k]
}
func (e mapEntry) Set(v string) error { e.m[e.k] = v; return nil }
func (e mapEntry) Type() string       { return "string" }

// KnownKinds are the workload kinds reloader knows: o.Kinds, else workload.Known().
func (o Options) KnownKinds() workload.Catalog {
	if o.Kinds == nil {
		return workload.Known()
	}
	return o.Kinds
}

// workloadType returns the plural, lower-case form of a --ignored-workload-types entry (a
// kind's singular or plural name, any case), or "" when it names no kind of kinds.
func workloadType(kinds workload.Catalog, t string) string {
	t = strings.ToLower(strings.TrimSpace(t))
	for _, k := range kinds {
		if plural := k.Describe().Resource.Resource; t == plural || t == strings.ToLower(k.Name()) {
			return plural
		}
	}
	return ""
}

// Effective lists every flag with the value in force, by flag name, plus the settings that
// come from the environment; secrets (webhook and alert URLs) are left out.
func (o Options) Effective() map[string]string {
	out := map[string]string{}
	fs := pflag.NewFlagSet("effective", pflag.ContinueOnError)
	o.BindFlags(fs)
	fs.VisitAll(func(f *pflag.Flag) {
		// URLs of tokens, and a proxy's URL may carry a password: only whether they are set.
		switch f.Name {
		case "webhook-url", "alert-webhook-url", "alert-proxy":
			out[f.Name+"-set"] = strconv.FormatBool(f.Value.String() != "")
		default:
			out[f.Name] = f.Value.String()
		}
	})
	out["METRICS_COUNT_BY_NAMESPACE"] = strconv.FormatBool(o.MetricsCountByNamespace)
	out["ALERT_ON_RELOAD"] = strconv.FormatBool(o.Alert.Enabled)
	out["ALERT_SINK"] = o.Alert.Sink
	return out
}
