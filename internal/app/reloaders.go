package app

import (
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/reloader-operator/reloader/internal/alert"
	"github.com/reloader-operator/reloader/internal/coalesce"
	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/notify"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
	"github.com/reloader-operator/reloader/internal/workload"
)

// addReloaders adds a reconciler per workload kind, or, with --webhook-url, one notifier that
// uses them only to find the affected workloads and POSTs instead of reloading. Alerts, when
// ALERT_ON_RELOAD asks for them, follow each reload, and so does the following of the
// rollout that each reload starts.
func addReloaders(mgr manager.Manager, conf options.Config, sources []controller.SourceType, kinds []workload.Kind, configs *reloaderconfig.Cache, m *metrics.Metrics, logger logr.Logger) error {
	alerts, err := newAlerter(conf, m, logger)
	if err != nil {
		return err
	}
	if alerts != nil {
		if err := mgr.Add(alerts); err != nil {
			return err
		}
	}
	window := coalesce.New(conf.CoalesceWindow)
	policy := reload.Policy{Keys: conf.Keys, AutoReloadAll: conf.AutoReloadAll, IgnoredKinds: conf.IgnoredSources}
	behaviour := controller.Behaviour{
		Events:               reload.Events{OnCreate: conf.ReloadOnCreate, OnDelete: conf.ReloadOnDelete},
		RunCronJobs:          conf.RunCronJobsOnReload,
		RecreateFinishedJobs: conf.RecreateFinishedJobs,
	}
	recorder := mgr.GetEventRecorder("reloader")
	rollouts := &controller.Rollouts{Deadline: conf.RolloutDeadline, Recorder: recorder, Metrics: m, Now: time.Now}
	var reconcilers []*controller.WorkloadReconciler
	for _, kind := range kinds {
		reconcilers = append(reconcilers, &controller.WorkloadReconciler{
			Client:     mgr.GetClient(),
			Kind:       kind,
			Sources:    sources,
			Policy:     policy,
			Behaviour:  behaviour,
			Strategy:   conf.Strategy,
			Window:     window,
			Recorder:   recorder,
			Metrics:    m,
			Alerts:     alerts,
			Rollouts:   rollouts,
			Namespaces: conf.NamespaceLabels,
			Workers:    conf.Workers,
			Configs:    configs,
			Now:        time.Now,
		})
	}
	if conf.WebhookURL != "" && len(reconcilers) > 0 {
		poster, err := notify.NewPoster(conf.WebhookTimeout, conf.WebhookRetries, "")
		if err != nil {
			return err
		}
		hook := &notify.Webhook{URL: conf.WebhookURL, Poster: poster}
		n := &controller.Notifier{Client: mgr.GetClient(), Sources: sources, Workloads: reconcilers,
			Events: behaviour.Events, Send: hook.Send, Metrics: m, Now: time.Now}
		return n.SetupWithManager(mgr)
	}
	for _, r := range reconcilers {
		if err := r.SetupWithManager(mgr); err != nil {
			return err
		}
	}
	return rollouts.SetupWithManager(mgr, kinds)
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
	return a, nil
}
