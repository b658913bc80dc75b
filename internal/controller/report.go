package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/reloader-operator/reloader/internal/alert"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/termsafe"
	"github.com/reloader-operator/reloader/internal/whatchanged"
)

// done is what an execution did, for report.
type done struct {
	plan reload.Plan
	// reloaded are the changes written into the template: pods roll.
	reloaded []reload.Change
	// what tells, per reloaded change, its keys and writer.
	what  []whatchanged.Report
	pause reload.PauseStep
	// failed is the write's error; nothing else is reported then.
	failed error
	// wrote is true when the workload was written.
	wrote   bool
	related runtime.Object
	latency time.Duration
}

// report tells, in one place, what an execution did: logs, Events, metrics and alerts. It
// returns the reconcile's outcome.
func (r *WorkloadReconciler) report(ctx context.Context, obj client.Object, d done) string {
	logger, kind := log.FromContext(ctx), r.Kind.Name()
	if len(d.plan.Skipped) > 0 {
		r.Metrics.SkippedReload(kind, d.plan.Skip.Reason)
		logger.Info("reload skipped", "reason", d.plan.Skip.Why)
		r.Recorder.Eventf(obj, d.related, corev1.EventTypeNormal, ReasonReloadSkipped, "Reload",
			"%s", termsafe.ClipNote(fmt.Sprintf("Not reloading %s %s after change of %s: %s", kind, obj.GetName(), describe(d.plan.Skipped), d.plan.Skip.Why)))
	}
	if d.failed != nil {
		// A conflict means a stale copy was read: the retry reads the new one, and a reload
		// planned from the stale copy is never written. Not a failure anyone should see.
		if len(d.reloaded) > 0 && !apierrors.IsConflict(d.failed) {
			r.Metrics.Reloaded(kind, obj.GetNamespace(), false, 0)
			r.Recorder.Eventf(obj, d.related, corev1.EventTypeWarning, ReasonReloadFail, "Reload",
				"%s", termsafe.ClipNote(fmt.Sprintf("Reload after change of %s failed: %v", describe(d.reloaded), d.failed)))
		}
		return metrics.OutcomeError
	}
	if d.pause.Resume {
		r.Metrics.Actions.WithLabelValues(kind, "resume").Inc()
		logger.Info("resumed after pause period")
		r.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, ReasonResumed, "Resume",
			"Resumed %s %s after its pause period", kind, obj.GetName())
	}
	if len(d.reloaded) == 0 {
		switch {
		case len(d.plan.Skipped) > 0:
			return metrics.OutcomeSkipped
		case d.wrote && !d.pause.Resume:
			logger.V(1).Info("recorded source hashes", "record", d.plan.Record.Encode())
			return metrics.OutcomeRecorded
		}
		logger.V(2).Info("sources unchanged", "sources", len(d.plan.Record))
		return metrics.OutcomeUnchanged
	}
	r.Metrics.Reloaded(kind, obj.GetNamespace(), true, d.latency)
	r.Metrics.Actions.WithLabelValues(kind, "reload").Inc()
	if d.pause.Pause {
		r.Metrics.Actions.WithLabelValues(kind, "pause").Inc()
	}
	for i, ch := range d.reloaded {
		logger.Info("reloaded", append([]any{"source", ch.ID.String(), "hash", ch.Hash, "containers", ch.Containers}, whatLogged(d.what, i)...)...)
	}
	reloaded := alert.SourcesOf(d.reloaded, d.what...)
	r.Metrics.ReloadedBy(kind, triggerManager(d.what))
	r.Recorder.Eventf(obj, d.related, corev1.EventTypeNormal, ReasonReloaded, "Reload",
		"%s", termsafe.ClipNote(fmt.Sprintf("Reloaded %s %s after change of %s", kind, obj.GetName(), alert.Describe(reloaded))))
	r.Alerts.Queue(alert.Reload{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), Sources: reloaded, Time: r.Now()})
	if r.OnReload != nil {
		r.OnReload(Reloaded{Kind: kind, Workload: obj, Changes: d.reloaded, At: r.Now()})
	}
	return metrics.OutcomeReloaded
}

func describe(changes []reload.Change) string { return alert.Describe(alert.SourcesOf(changes)) }
