package app

import (
	"context"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/reloader-operator/reloader/internal/metainfo"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/termsafe"
	"github.com/reloader-operator/reloader/internal/workload"
)

// ReasonDegradedMode is the reason of the Warning Event on the meta-info ConfigMap when some
// workload kind is read without watch.
const ReasonDegradedMode = "DegradedMode"

// ReasonJobReloadRights is the reason of the Warning Event on the meta-info ConfigMap when Jobs
// are reloaded but reloader may not delete and create them or write their replacement records.
const ReasonJobReloadRights = "JobReloadRightsMissing"

// announce makes the degraded mode loud: a warning in the log of every replica naming each
// kind and the rule to add, reloader_degraded per kind (1 degraded, 0 watched), and, from the
// leader, a Warning Event on the meta-info ConfigMap saying the same.
func (d *degradedMode) announce(mgr manager.Manager, conf options.Config, kinds []workload.Kind, events recorder.EventRecorder, logger logr.Logger) error {
	for _, name := range d.unlisted {
		logger.Info("WARNING: reloader's RBAC allows neither list and watch nor list and get on " + name +
			"s (yet?); reloader stays unready until it may list and watch them, or list and get them and is restarted")
	}
	gauge := metrics.NewDegraded(crmetrics.Registry)
	for _, k := range kinds {
		v := 0.0
		if d.unwatched.Has(k.Name()) {
			v = 1
		}
		gauge.WithLabelValues(k.Name()).Set(v)
	}
	if d.jobRights != "" {
		logger.Info("WARNING: " + d.jobRights)
		if err := mgr.Add(&degradedEvent{reader: mgr.GetAPIReader(), events: events, namespace: conf.ReloaderNamespace,
			reason: ReasonJobReloadRights, note: d.jobRights, logger: logger}); err != nil {
			return err
		}
	}
	msg := d.message()
	if msg == "" {
		return nil
	}
	logger.Info("WARNING: " + msg)
	return mgr.Add(&degradedEvent{reader: mgr.GetAPIReader(), events: events, namespace: conf.ReloaderNamespace, reason: ReasonDegradedMode, note: msg, logger: logger})
}

// degradedEvent puts the Warning Event on the meta-info ConfigMap once, as the leader: the
// ConfigMap upstream's tooling reads, so whoever looks at the install sees it.
type degradedEvent struct {
	reader    client.Reader
	events    recorder.EventRecorder
	namespace string
	reason    string
	note      string
	logger    logr.Logger
}

// Start implements manager.Runnable.
func (e *degradedEvent) Start(ctx context.Context) error {
	if e.namespace == "" {
		e.logger.Info("no Event for the degraded mode: set RELOADER_NAMESPACE (or POD_NAMESPACE) to reloader's namespace")
		return nil
	}
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: e.namespace, Name: metainfo.Name}
	if err := e.reader.Get(ctx, key, cm); err != nil {
		// Not written (RBAC) or not readable: the Event names it all the same, so that
		// `kubectl get events --field-selector involvedObject.name=reloader-meta-info` finds it.
		e.logger.Info("meta-info ConfigMap not readable; the degraded-mode Event names it without its UID", "error", err.Error())
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.namespace, Name: metainfo.Name}}
	}
	e.events.Eventf(cm, nil, corev1.EventTypeWarning, e.reason, "Start", "%s", termsafe.ClipNote(e.note))
	return nil
}

// NeedLeaderElection is true: the replica that reloads says so.
func (e *degradedEvent) NeedLeaderElection() bool { return true }
