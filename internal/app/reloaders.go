package app

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/reloader-operator/reloader/internal/alert"
	"github.com/reloader-operator/reloader/internal/baseline"
	"github.com/reloader-operator/reloader/internal/coalesce"
	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/controller/configstatus"
	"github.com/reloader-operator/reloader/internal/controller/generic"
	"github.com/reloader-operator/reloader/internal/controller/rollout"
	"github.com/reloader-operator/reloader/internal/controller/webhook"
	"github.com/reloader-operator/reloader/internal/hashkey"
	"github.com/reloader-operator/reloader/internal/ledger"
	"github.com/reloader-operator/reloader/internal/lookup"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/notify"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/pace"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
	"github.com/reloader-operator/reloader/internal/report"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/whatchanged/track"
	"github.com/reloader-operator/reloader/internal/workload"
)

// addReloaders adds a reconciler per workload kind, or, with --webhook-url, one notifier that
// uses them only to find the affected workloads and POSTs instead of reloading. Alerts, when
// ALERT_ON_RELOAD asks for them, follow each reload, and so does the following of the
// rollout that each reload starts. With configStatus, the reconcilers' reloads and the
// rollouts' outcomes also feed the status of the ReloaderConfigs. shards, when set, tells
// the namespaces this replica's shards hold (--shards). events records the Events. The
// reconcilers read through reader: the manager's client, or, in degraded mode, one that
// reads the unwatched kinds from the API server. It returns the baselines the reconcilers
// share (nil with --webhook-url), for a plan made beside them.
func addReloaders(mgr manager.Manager, reader client.Client, conf options.Config, sources []sourcecache.SourceType, kinds []workload.Kind, key *hashkey.Loader, configs *reloaderconfig.Cache, configStatus bool, rollouts *rollout.Rollouts, m *metrics.Metrics, shards *sharding, events recorder.EventRecorder, degraded *degradedMode, parsed *reload.Caches, logger logr.Logger) (*baseline.Baselines, *ledger.Ledger, error) {
	shard := shards.ready()
	alerts, err := newAlerter(conf, m, logger)
	if err != nil {
		return nil, nil, err
	}
	if alerts != nil {
		if err := mgr.Add(alerts); err != nil {
			return nil, nil, err
		}
	}
	window := coalesce.New(conf.CoalesceWindow)
	recorder := controller.SeriesRecorder(events, mgr.GetScheme())
	rollouts.Recorder, rollouts.Metrics = recorder, m
	// One pacer for every kind: --reload-rate is across this replica, or with --shards across
	// the install, each replica taking its share by the shards it owns.
	pacer := pace.New(conf.ReloadRate, conf.ReloadBurst, conf.FirstSightRate)
	shards.share(pacer)
	// One ledger of first records for every kind.
	led, err := newLedger(mgr, conf, pacer, logger)
	if err != nil {
		return nil, nil, err
	}
	// One set of baselines for every kind: the sources' handlers run once per event.
	baselines := baseline.New()
	baselines.Relisted = shards.relisted()
	// One table of the sources' latest changes, for the keys named in reports.
	changes := track.New(0)
	changes.OverCap.Recorder, changes.OverCap.Log = recorder, logger.WithName("keys")
	// One flap table for every kind: a source flaps whatever kind uses it.
	flaps, err := newFlaps(mgr, conf, m)
	if err != nil {
		return nil, nil, err
	}
	// One handler per source type for every kind: the change table and the flap breaker
	// observe each source event once, before any kind maps it.
	sourceEvents := lookup.NewSourceEvents(changes.Observe, controller.ObserveFlaps(flaps, time.Now))
	if key != nil && !key.Own() && replacesJobs(conf, kinds) {
		logger.Info("WARNING: no namespace of reloader's own (RELOADER_NAMESPACE, POD_NAMESPACE): the install key's Secret is in a namespace others may write, so Job replacement records are neither signed nor trusted from the cluster; if reloader stops between a Job's delete and its re-create, no other process re-creates it")
	}
	// One reporter for every kind: Events, metrics, alerts, and what is said once.
	rep := report.New(recorder, m, alerts)
	var reconcilers []*controller.WorkloadReconciler
	for _, kind := range kinds {
		r := NewReconciler(conf, reader, kind, sources, configs, window)
		r.Report, r.Rollouts, r.APIReader = rep, rollouts, mgr.GetAPIReader()
		r.Policy.Caches = parsed
		if r.Unwatched = degraded.unwatched; r.Unwatched.Has(kind.Name()) {
			r.Rollouts = nil // followed through the status an informer brings
		}
		r.Shard, r.Pacer, r.Baselines, r.Changes, r.Flaps = shard, pacer, baselines, changes, flaps
		r.SourceEvents = sourceEvents
		r.Ledger = led
		if key != nil {
			// A nil *Loader in the interface would not read as "no key".
			r.RecordKey = key
		}
		reconcilers = append(reconcilers, r)
	}
	// One set of guardrails for every kind: a source flaps, and its waves span, whatever
	// kinds use it.
	from := GuardrailsFrom{Flaps: flaps, Cluster: controller.WaveCluster(reconcilers), Cache: reader, Live: mgr.GetAPIReader(), Metrics: m, Caches: parsed}
	if len(reconcilers) > 0 {
		from.Key = controller.InstallKey(reconcilers[0]) // every kind's: the same loader
	}
	guardrails := NewGuardrails(conf, from)
	// One chain for every kind, generic targets included.
	gates := Gates(guardrails)
	for _, r := range reconcilers {
		r.Gates = gates
	}
	if conf.WebhookURL != "" && len(reconcilers) > 0 {
		poster, err := notify.NewPoster(conf.WebhookTimeout, conf.WebhookRetries, "")
		if err != nil {
			return nil, nil, err
		}
		hook := &notify.Webhook{URL: conf.WebhookURL, Poster: poster}
		n := &webhook.Notifier{Lookup: NewLookup(conf, reader, sources, configs), Kinds: kinds,
			Events: reconcilers[0].Behaviour.Events, Send: hook.Send, Metrics: m, Changes: changes, Now: time.Now}
		// Nothing reloads, nothing notes a baseline.
		return nil, nil, n.SetupWithManager(mgr)
	}
	if configStatus {
		status := &configstatus.Reconciler{Client: reader, Lookup: NewLookup(conf, reader, sources, configs),
			Kinds: degraded.watched(kinds), Keys: conf.Keys, Reloads: configstatus.NewReloadLog(0),
			Recorder: recorder, Shard: shard, Now: time.Now}
		rep.OnReload = status.Reloaded
		status.Held = func(ctx context.Context, kind workload.Kind, obj client.Object) (reload.Hold, time.Duration, error) {
			for _, r := range reconcilers {
				if r.Kind.Name() == kind.Name() {
					return r.HeldNow(ctx, obj)
				}
			}
			return reload.Hold{}, 0, nil
		}
		rollouts.OnOutcome = status.RolloutEnded
		if err := status.SetupWithManager(mgr); err != nil {
			return nil, nil, err
		}
		// The workloads' pipeline: the same gates in the same chain, the same pacer, a
		// reporter of the same kind, and the same namespace selector.
		rep := report.New(recorder, m, alerts)
		generic := &generic.Reconciler{Client: reader, APIReader: mgr.GetAPIReader(),
			Configs: configs, Reporter: rep, Sources: sources, Shard: shard, Now: time.Now,
			Kinds: conf.GenericKinds, Namespaces: conf.NamespaceLabels, Gates: gates,
			Pacer: pacer, Workers: max(conf.Workers/2, 2), Metrics: m}
		if err := generic.SetupWithManager(mgr); err != nil {
			return nil, nil, err
		}
	}
	// The end of a rollout wakes the workloads a wave holds for it.
	ended := rollouts.OnOutcome
	rollouts.OnOutcome = func(o rollout.Outcome) {
		if ended != nil {
			ended(o)
		}
		guardrails.Wave.Ended(o.Kind, o.Namespace, o.Name)
	}
	for _, r := range reconcilers {
		if err := r.SetupWithManager(mgr); err != nil {
			return nil, nil, err
		}
	}
	return baselines, led, rollouts.SetupWithManager(mgr, degraded.watched(kinds))
}

// NewReconciler returns the reconciler of one kind as conf configures its decisions, reading
// through c, with the ReloaderConfigs compiled into configs (nil when their API is not
// served); what it reports to (Report) is the caller's to set. `reloader
// explain` builds its reconcilers here too, so it decides as the controller does.
func NewReconciler(conf options.Config, c client.Client, kind workload.Kind, sources []sourcecache.SourceType, configs *reloaderconfig.Cache, window *coalesce.Window) *controller.WorkloadReconciler {
	return &controller.WorkloadReconciler{
		Client: c,
		Kind:   kind,
		Settings: controller.Settings{
			Policy: policy(conf),
			Behaviour: controller.Behaviour{
				Events:               reload.Events{OnCreate: conf.ReloadOnCreate, OnDelete: conf.ReloadOnDelete},
				RunCronJobs:          conf.RunCronJobsOnReload,
				RecreateFinishedJobs: conf.RecreateFinishedJobs,
			},
			Strategy:         conf.Strategy,
			Workers:          conf.Workers,
			ReconcileTimeout: conf.ReconcileTimeout,
			EnableEvict:      conf.EnableEvictStrategy,
		},
		Reads:  controller.Reads{Sources: sources, Namespaces: conf.NamespaceLabels, Configs: configs},
		Window: window,
		Now:    time.Now,
		// Pacer is the caller's: explain reserves no slots; so is Report: explain says nothing.
	}
}

// NewLookup returns the reads and questions every controller shares (lookup.Lookup), as
// conf configures the decisions, reading through c; configs is nil when the ReloaderConfig
// API is not served. `reloader explain` asks through it too.
func NewLookup(conf options.Config, c client.Reader, sources []sourcecache.SourceType, configs *reloaderconfig.Cache) lookup.Lookup {
	return lookup.Lookup{Client: c, Sources: sources, Policy: policy(conf), Configs: configs, Namespaces: conf.NamespaceLabels}
}

func policy(conf options.Config) reload.Policy {
	return reload.Policy{Keys: conf.Keys, AutoReloadAll: conf.AutoReloadAll, IgnoredKinds: conf.IgnoredSources}
}

// newAlerter returns the alert sender the ALERT_* settings ask for, or nil.
func newAlerter(conf options.Config, m *metrics.Metrics, logger logr.Logger) (*alert.Alerter, error) {
	if !conf.Alert.Enabled {
		return nil, nil
	}
	poster, err := notify.NewPoster(conf.WebhookTimeout, conf.WebhookRetries, conf.Alert.Proxy)
	if err != nil {
		return nil, err
	}
	a := alert.New(conf.Alert.Sink, conf.Alert.WebhookURL, conf.Alert.AdditionalInfo, poster, logger.WithName("alert"))
	a.Delivered = m.Notified
	a.Dropped = func(ns string) { m.AlertsDropped.WithLabelValues(ns).Inc() }
	return a, nil
}
