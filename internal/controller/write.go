package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/report"
	"github.com/reloader-operator/reloader/internal/workload"
	"github.com/reloader-operator/reloader/internal/writer"
	"github.com/reloader-operator/reloader/internal/writer/evict"
	"github.com/reloader-operator/reloader/internal/writer/jobreplace"
)

// Names the writers' packages define, kept here for the callers of this package.
const (
	// ReplacementLabel marks reloader's Job replacement records; its value is the kind replaced.
	ReplacementLabel = jobreplace.ReplacementLabel
	// ReasonUntrustedRecord is the Event reason on a replacement record that is not acted on.
	ReasonUntrustedRecord = jobreplace.ReasonUntrustedRecord
	// Event reasons of the evict restart strategy.
	ReasonEvicting              = evict.ReasonEvicting
	ReasonEvictionBlocked       = evict.ReasonEvictionBlocked
	ReasonRestarted             = evict.ReasonRestarted
	ReasonEvictStrategyDisabled = evict.ReasonEvictStrategyDisabled
)

// ReplacementRecords is the cache setting for the Job replacement records
// (jobreplace.ReplacementRecords).
func ReplacementRecords() (client.Object, cache.ByObject) { return jobreplace.ReplacementRecords() }

// writeParts are the reconciler's writers, chosen once by its kind (writeParts): they get what they
// need from the reconciler's fields when they are made, never the reconciler itself.
type writeParts struct {
	once sync.Once
	// write stores a reload; resume, when the kind's writer has work that spans reconciles
	// (a Job deleted and not yet re-created), is asked first on each reconcile.
	write  writer.Writer
	resume writer.Resumer
	// evict runs the evict restart strategy (evict.Restarter).
	evict  *evict.Restarter
	report writer.Reporter
	// conflicts count the reconciles in a row that met a conflict, per workload.
	conflicts writer.Conflicts
	// echoes are the writes not yet heard back through the watch (echo.go); usable before
	// the writers are made.
	echoes echoes
}

// writeParts makes, once, the writers of r.Kind: a Job is re-created, a CronJob may start a Job
// beside its patch, every other kind is patched. They are made on first use (SetupWithManager
// asks, and a reconciler a test builds without it too), from the fields set by then.
func (r *WorkloadReconciler) writeParts() *writeParts {
	out := &r.parts
	out.once.Do(func() {
		out.report = writerReport{r.Report}
		patch := &writer.Patch{Client: r.Client, Kind: r.Kind, Keys: r.Policy.Keys}
		out.write = patch
		switch r.Kind.(type) {
		case workload.Recreated:
			jobs := &jobreplace.Writer{Client: r.Client, APIReader: r.APIReader, Kind: r.Kind, Key: r.RecordKey, Report: out.report, Patch: patch}
			out.write, out.resume = jobs, jobs
		case workload.Scheduled:
			out.write = &jobreplace.RunOnReload{Client: r.Client, Kind: r.Kind, Report: out.report, Patch: patch}
		}
		out.evict = &evict.Restarter{Client: r.Client, APIReader: r.APIReader, Kind: r.Kind, Enabled: r.EnableEvict, Now: r.Now, Report: out.report}
	})
	return out
}

// writerReport is the reporter the writers tell: the pipeline's, with the counts only
// writers make.
type writerReport struct{ *report.Reporter }

// Recreated implements writer.Reporter.
func (w writerReport) Recreated(kind, namespace string) { w.Metrics.Reloaded(kind, namespace, true, 0) }

// RecordRefused implements writer.Reporter.
func (w writerReport) RecordRefused(kind, reason string) {
	w.Metrics.RecordsRefused.WithLabelValues(kind, reason).Inc()
}

// write stores the updated copy of obj (planned from it, with w's template), as the reload of
// changes recording next, through the kind's writer.
func (r *WorkloadReconciler) write(ctx context.Context, obj, updated client.Object, w seen, changes []reload.Change, next reload.Record) error {
	ctx, cancel := writer.Carried(ctx) // a write begun is finished, and reported, on stopping too
	defer cancel()
	return r.writeParts().write.Write(ctx, obj, updated, writer.Input{Changes: changes, Record: next, Template: w.tw, RunCronJobs: w.settings.runCronJobs})
}

// resume lets the kind's writer carry on work it left pending for nn (current is what the
// cache holds under the name, exists false when nothing): handled is true when it did, and
// the reconcile ends there.
func (r *WorkloadReconciler) resume(ctx context.Context, nn types.NamespacedName, current client.Object, exists bool) (reconcile.Result, bool, error) {
	if rs := r.writeParts().resume; rs != nil {
		return rs.Resume(ctx, nn, current, exists)
	}
	return reconcile.Result{}, false, nil
}

// watchReplacements lets the controller hear of what its writer keeps in the cluster (the
// records of Job replacements), unless those are read without watch (unwatched.go).
func (r *WorkloadReconciler) watchReplacements(b *builder.Builder) *builder.Builder {
	wt, ok := r.writeParts().write.(writer.Watcher)
	if !ok || r.Unwatched != nil && r.Unwatched.Records {
		return b
	}
	return wt.Watch(b)
}

// apply writes the changes into the copy of the workload (or its referenced Deployment). It
// reports whether the pods will roll: a change that leaves the template as it was reloads
// nothing, and is not reported as a reload.
func (r *WorkloadReconciler) apply(ctx context.Context, updated client.Object, w seen, changes []reload.Change) bool {
	if w.restart == evict.Evict {
		return true // the template stays; evict.Restarter.Mark starts the restart
	}
	if rs, ok := r.Kind.(workload.Restartable); ok && r.restarts(ctx, updated) {
		rs.Restart(updated, r.Now())
		return true
	}
	tpl := r.Kind.PodTemplate(updated)
	if w.tw.Owner != nil {
		tpl = w.tw.Tpl
	}
	before := tpl.DeepCopy()
	w.settings.strategy.Apply(tpl, updated.GetNamespace(), changes)
	return !equality.Semantic.DeepEqual(before, tpl)
}

// restarts reports whether an Argo Rollout asks to be restarted rather than rolled.
func (r *WorkloadReconciler) restarts(ctx context.Context, obj client.Object) bool {
	key := r.Policy.Keys.RolloutStrategy
	switch v := strings.TrimSpace(obj.GetAnnotations()[key]); v {
	case "", "rollout":
		return false
	case "restart":
		return true
	default:
		r.invalid(ctx, obj, fmt.Errorf("annotation %s: %q is neither rollout nor restart; rolling out", key, v))
		return false
	}
}

// pause applies step, the pause-period step a decision made, to the copy of a Pausable
// workload that the reconcile writes.
func (r *WorkloadReconciler) pause(ctx context.Context, obj client.Object, step reload.PauseStep) {
	p, ok := r.Kind.(workload.Pausable)
	if !ok {
		return
	}
	keys := r.Policy.Keys
	ann := obj.GetAnnotations()
	if step.Invalid != nil {
		r.invalid(ctx, obj, step.Invalid)
	}
	switch {
	case step.Pause:
		p.SetPaused(obj, true)
		setAnnotation(obj, keys.PausedAt, step.PausedAt)
	case step.Resume:
		p.SetPaused(obj, false)
	}
	if step.ClearPausedAt {
		delete(ann, keys.PausedAt)
		obj.SetAnnotations(ann)
	}
}
