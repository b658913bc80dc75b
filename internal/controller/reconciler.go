// Package controller reconciles workloads against the sources they depend on: one generic
// reconciler serves every workload kind.
package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/reloader-operator/reloader/internal/alert"
	"github.com/reloader-operator/reloader/internal/coalesce"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/workload"
)

// FieldOwner is the field manager of every write, upstream's name.
const FieldOwner = "Reloader"

// Event reasons.
const (
	ReasonReloaded          = "Reloaded"
	ReasonReloadFail        = "ReloadFail"
	ReasonReloadSkipped     = "ReloadSkipped"
	ReasonInvalidAnnotation = "InvalidAnnotation"
	ReasonResumed           = "Resumed"
)

// WorkloadReconciler brings one kind of workload in line with its sources: when the content
// of a source that concerns a workload differs from the hash recorded on the workload, it
// writes the new hashes into the pod template and the record, in one patch.
type WorkloadReconciler struct {
	Client    client.Client
	Kind      workload.Kind
	Sources   []SourceType
	Policy    reload.Policy
	Behaviour Behaviour
	Strategy  reload.Strategy
	Window    *coalesce.Window
	Recorder  recorder.EventRecorder
	Metrics   *metrics.Metrics
	// Alerts hears of every reload; nil sends none.
	Alerts *alert.Alerter
	// Namespaces selects, by label, the namespaces whose workloads reload; nil selects all.
	// It is read on each reconcile, so a namespace gaining or losing a label counts at once.
	Namespaces labels.Selector
	// Workers is how many workloads of this kind reconcile at once.
	Workers int
	Now     func() time.Time

	jobs pendingJobs
}

// Behaviour holds the flags that change what a reload does.
type Behaviour struct {
	Events reload.Events
	// RunCronJobs also starts a Job when a CronJob reloads (upstream's behaviour).
	RunCronJobs bool
	// RecreateFinishedJobs also replaces Jobs that have completed or failed, as upstream
	// does; --recreate-finished-jobs defaults to it.
	RecreateFinishedJobs bool
}

// Reconcile implements reconcile.Reconciler.
func (r *WorkloadReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	started := time.Now()
	res, outcome, err := r.reconcile(ctx, req)
	if err != nil {
		outcome = metrics.OutcomeError
	}
	r.Metrics.Reconciled(r.Kind.Name(), outcome, time.Since(started))
	return res, err
}

func (r *WorkloadReconciler) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, string, error) {
	started := r.Now()
	k := r.windowKey(req.NamespacedName)
	obj := r.Kind.NewObject()
	err := r.Client.Get(ctx, req.NamespacedName, obj)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, "", err
	}
	if pending, ok := r.jobs.get(req.NamespacedName); ok {
		res, err := r.createReplacement(ctx, req.NamespacedName, pending, obj, err == nil)
		return res, metrics.OutcomeReloaded, err
	}
	if err != nil || !obj.GetDeletionTimestamp().IsZero() {
		r.Window.Done(k, started)
		return reconcile.Result{}, metrics.OutcomeUnchanged, nil
	}
	logger := log.FromContext(ctx)
	if selected, err := r.namespaceSelected(ctx, obj.GetNamespace()); err != nil || !selected {
		// Left as it is, record included: if the namespace is selected again, changes made
		// meanwhile are caught up then.
		r.Window.Done(k, started)
		return reconcile.Result{}, metrics.OutcomeIgnored, err
	}

	tw, err := r.template(ctx, obj)
	if err != nil {
		return reconcile.Result{}, "", err
	}
	rules, errs := reload.ParseRules(r.Policy.Keys, obj.GetAnnotations(), tw.tpl.Annotations)
	r.invalid(ctx, obj, errs...)

	sources, err := r.concerned(ctx, obj.GetNamespace(), tw.tpl, &rules)
	if err != nil {
		return reconcile.Result{}, "", err
	}
	hashes := make(map[source.ID]string, len(sources))
	for id, o := range sources {
		hashes[id] = o.hash
	}
	last, hasRecord := r.record(ctx, obj)
	changed, next := reload.Diff(rebase(last, sources), hasRecord, hashes, r.Behaviour.Events)
	if len(changed) > 0 {
		if wait := r.Window.Wait(k); wait > 0 {
			logger.V(1).Info("waiting for changes to settle", "wait", wait.String(), "changed", len(changed))
			return reconcile.Result{RequeueAfter: wait}, metrics.OutcomeWaiting, nil
		}
	}
	changes := make([]reload.Change, 0, len(changed))
	for _, id := range changed {
		o := sources[id]
		changes = append(changes, reload.Change{ID: id, Hash: o.hash, Containers: reload.TargetContainers(o.ref, &tw.tpl.Spec)})
	}
	var related runtime.Object
	if len(changed) > 0 {
		related = r.relatedRef(sources[changed[0]].obj)
	}
	outcome := metrics.OutcomeUnchanged
	if why, reason := r.skip(obj); len(changes) > 0 && why != "" {
		outcome = metrics.OutcomeSkipped
		r.Metrics.SkippedReload(r.Kind.Name(), reason)
		logger.Info("reload skipped", "reason", why)
		r.Recorder.Eventf(obj, related, corev1.EventTypeNormal, ReasonReloadSkipped, "Reload",
			"Not reloading %s %s after change of %s: %s", r.Kind.Name(), obj.GetName(), describe(changes), why)
		changes = nil
	}

	updated := obj.DeepCopyObject().(client.Object)
	if len(changes) > 0 {
		r.apply(ctx, updated, tw, changes, started)
	}
	if hasRecord || len(next) > 0 {
		setAnnotation(updated, reload.RecordAnnotation, next.Encode())
	}
	requeue, resumed := r.pause(ctx, updated, len(changes) > 0, started)
	if equality.Semantic.DeepEqual(obj, updated) && !tw.changed() {
		logger.V(2).Info("sources unchanged", "sources", len(next))
		r.Window.Done(k, started)
		return reconcile.Result{RequeueAfter: requeue}, outcome, nil
	}

	if err := r.write(ctx, obj, updated, tw, changes, next); err != nil {
		if apierrors.IsConflict(err) {
			// Read a stale copy; the retry reads the new one. Not a failure anyone should see.
			return reconcile.Result{}, "", fmt.Errorf("write %s: %w", k, err)
		}
		if len(changes) > 0 {
			r.Metrics.Reloaded(r.Kind.Name(), obj.GetNamespace(), false, 0)
			r.Recorder.Eventf(obj, related, corev1.EventTypeWarning, ReasonReloadFail, "Reload",
				"Reload after change of %s failed: %v", describe(changes), err)
		}
		return reconcile.Result{}, "", fmt.Errorf("write %s: %w", k, err)
	}
	if resumed {
		r.Metrics.Actions.WithLabelValues(r.Kind.Name(), "resume").Inc()
		logger.Info("resumed after pause period")
		r.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, ReasonResumed, "Resume",
			"Resumed %s %s after its pause period", r.Kind.Name(), obj.GetName())
	}
	var latency time.Duration
	if first, ok := r.Window.FirstChange(k); ok {
		latency = r.Now().Sub(first)
	}
	r.Window.Done(k, started)
	if len(changes) == 0 {
		logger.V(1).Info("recorded source hashes", "record", next.Encode())
		if outcome == metrics.OutcomeUnchanged && !resumed {
			outcome = metrics.OutcomeRecorded
		}
		return reconcile.Result{RequeueAfter: requeue}, outcome, nil
	}
	r.Metrics.Reloaded(r.Kind.Name(), obj.GetNamespace(), true, latency)
	r.Metrics.Actions.WithLabelValues(r.Kind.Name(), "reload").Inc()
	if _, was := obj.GetAnnotations()[r.Policy.Keys.PausedAt]; !was {
		if _, is := updated.GetAnnotations()[r.Policy.Keys.PausedAt]; is {
			r.Metrics.Actions.WithLabelValues(r.Kind.Name(), "pause").Inc()
		}
	}
	for _, ch := range changes {
		logger.Info("reloaded", "source", ch.ID.String(), "hash", ch.Hash, "containers", ch.Containers)
	}
	reloaded := sourcesOf(changes)
	r.Recorder.Eventf(obj, related, corev1.EventTypeNormal, ReasonReloaded, "Reload",
		"Reloaded %s %s after change of %s", r.Kind.Name(), obj.GetName(), alert.Describe(reloaded))
	r.Alerts.Queue(alert.Reload{Kind: r.Kind.Name(), Namespace: obj.GetNamespace(), Name: obj.GetName(), Sources: reloaded, Time: r.Now()})
	return reconcile.Result{RequeueAfter: requeue}, metrics.OutcomeReloaded, nil
}

// namespaceSelected applies the namespace selector to the namespace as it is now.
func (r *WorkloadReconciler) namespaceSelected(ctx context.Context, name string) (bool, error) {
	if r.Namespaces == nil {
		return true, nil
	}
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, ns); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return r.Namespaces.Matches(labels.Set(ns.Labels)), nil
}

// invalid reports bad annotations; the valid rules still apply.
func (r *WorkloadReconciler) invalid(ctx context.Context, obj client.Object, errs ...error) {
	if len(errs) == 0 {
		return
	}
	msg := errors.Join(errs...).Error()
	log.FromContext(ctx).Info("invalid reload annotation; the valid rules still apply", "error", msg)
	r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonInvalidAnnotation, "Validate", "%s", msg)
}

// windowKey names a workload in the coalescing window.
func (r *WorkloadReconciler) windowKey(nn types.NamespacedName) string {
	return r.Kind.Name() + "/" + nn.String()
}

// record reads the hashes last applied to the workload. An unreadable record counts as none:
// the workload is re-recorded without a reload rather than reloaded on a guess.
func (r *WorkloadReconciler) record(ctx context.Context, obj client.Object) (reload.Record, bool) {
	v, ok := obj.GetAnnotations()[reload.RecordAnnotation]
	if !ok {
		return nil, false
	}
	rec, err := reload.ParseRecord(v)
	if err != nil {
		log.FromContext(ctx).Info("ignoring unreadable record; recording anew", "error", err.Error())
		return nil, false
	}
	return rec, true
}

func setAnnotation(obj client.Object, key, value string) {
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[key] = value
	obj.SetAnnotations(ann)
}

// sourcesOf names the changed sources of a reload, as Events and alerts show them.
func sourcesOf(changes []reload.Change) []alert.Source {
	out := make([]alert.Source, len(changes))
	for i, ch := range changes {
		out[i] = alert.Source{Kind: ch.ID.Kind.Title(), Name: ch.ID.Name, Hash: ch.Hash, Deleted: ch.Hash == reload.Absent}
	}
	return out
}

func describe(changes []reload.Change) string { return alert.Describe(sourcesOf(changes)) }
