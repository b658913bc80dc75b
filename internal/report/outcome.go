package report

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/reloader-operator/reloader/internal/alert"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/whatchanged"
)

// Outcome is what one execution of a reconcile did, for Done.
type Outcome struct {
	// Kind names the target's kind.
	Kind string
	Plan reload.Plan
	// Reloaded are the changes written into the template: pods roll.
	Reloaded []reload.Change
	// What tells, per reloaded change, its keys and writer.
	What  []whatchanged.Report
	Pause reload.PauseStep
	// Failed is the write's error; nothing else is reported then.
	Failed error
	// Wrote is true when the target was written.
	Wrote   bool
	Related runtime.Object
	// Regarding, when set, is the object the Events go to instead of the target (a generic
	// target's ReloaderConfig: the target is then their related object).
	Regarding client.Object
	// Latency is the time from the first change the reload carries to its write.
	Latency time.Duration
}

// Done tells, in one place, what an execution did: logs, Events, metrics and alerts. It
// returns the reconcile's outcome.
func (r *Reporter) Done(ctx context.Context, obj client.Object, d Outcome) string {
	logger, kind := log.FromContext(ctx), d.Kind
	at := obj // where the Events go
	if d.Regarding != nil {
		at = d.Regarding
	}
	if len(d.Plan.Skipped) > 0 {
		r.Metrics.SkippedReload(kind, d.Plan.Skip.Reason)
		logger.Info("reload skipped", "reason", d.Plan.Skip.Why)
		r.Event(at, d.Related, false, ReasonReloadSkipped, "Reload",
			fmt.Sprintf("Not reloading %s %s after change of %s: %s", kind, obj.GetName(), Describe(d.Plan.Skipped), d.Plan.Skip.Why))
	}
	if d.Failed != nil {
		// A conflict means a stale copy was read: the retry reads the new one, and a reload
		// planned from the stale copy is never written. Not a failure anyone should see.
		if len(d.Reloaded) > 0 && !apierrors.IsConflict(d.Failed) {
			r.Metrics.Reloaded(kind, obj.GetNamespace(), false, 0)
			r.Event(at, d.Related, true, ReasonReloadFail, "Reload",
				fmt.Sprintf("Reload after change of %s failed: %v", Describe(d.Reloaded), d.Failed))
		}
		return metrics.OutcomeError
	}
	if d.Pause.Resume {
		r.Action(kind, "resume")
		logger.Info("resumed after pause period")
		r.Event(at, nil, false, ReasonResumed, "Resume", fmt.Sprintf("Resumed %s %s after its pause period", kind, obj.GetName()))
	}
	if len(d.Reloaded) == 0 {
		switch {
		case len(d.Plan.Skipped) > 0:
			return metrics.OutcomeSkipped
		case d.Wrote && !d.Pause.Resume:
			logger.V(1).Info("recorded source hashes", "record", d.Plan.Record.Encode())
			return metrics.OutcomeRecorded
		}
		logger.V(2).Info("sources unchanged", "sources", len(d.Plan.Record))
		return metrics.OutcomeUnchanged
	}
	r.Metrics.Reloaded(kind, obj.GetNamespace(), true, d.Latency)
	r.Action(kind, "reload")
	if d.Pause.Pause {
		r.Action(kind, "pause")
	}
	for i, ch := range d.Reloaded {
		logger.Info("reloaded", append([]any{"source", ch.ID.String(), "hash", ch.Hash, "containers", ch.Containers}, WhatLogged(d.What, i)...)...)
	}
	reloaded := alert.SourcesOf(d.Reloaded, d.What...)
	r.Metrics.ReloadedBy(kind, TriggerManager(d.What))
	r.Event(at, d.Related, false, ReasonReloaded, "Reload", fmt.Sprintf("Reloaded %s %s after change of %s", kind, obj.GetName(), alert.Describe(reloaded)))
	r.Alert(alert.Reload{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), Sources: reloaded, Time: r.now()})
	if r.OnReload != nil {
		r.OnReload(Reloaded{Kind: kind, Workload: obj, Changes: d.Reloaded, At: r.now()})
	}
	return metrics.OutcomeReloaded
}

// Describe names changes for a message: "ConfigMap app-config".
func Describe(changes []reload.Change) string { return alert.Describe(alert.SourcesOf(changes)) }

// TriggerManager is the metric label of a reload's writer: the manager of the newest change
// it carries (whatchanged.Label bounds the values).
func TriggerManager(what []whatchanged.Report) string {
	var newest *whatchanged.Writer
	for _, w := range what {
		if c := w.ChangedBy; c != nil && (newest == nil || !c.Time.Before(newest.Time)) {
			newest = c
		}
	}
	if newest == nil {
		return whatchanged.Label("")
	}
	return whatchanged.Label(newest.Manager)
}

// WhatLogged are the log pairs of the i-th change's keys and writer.
func WhatLogged(what []whatchanged.Report, i int) []any {
	if i >= len(what) {
		return nil
	}
	var kv []any
	if k := what[i].Keys().String(); k != "" {
		kv = append(kv, "keys", k)
	}
	if w := what[i].ChangedBy; w != nil {
		kv = append(kv, "changedBy", w.String())
	}
	return kv
}
