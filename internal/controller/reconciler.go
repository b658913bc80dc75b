// Package controller reconciles workloads against the sources they depend on: one generic
// reconciler serves every workload kind.
package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

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
	ReasonInvalidAnnotation = "InvalidAnnotation"
)

// WorkloadReconciler brings one kind of workload in line with its sources: when the content
// of a source that concerns a workload differs from the hash recorded on the workload, it
// writes the new hashes into the pod template and the record, in one patch.
type WorkloadReconciler struct {
	Client   client.Client
	Kind     workload.Kind
	Sources  []SourceType
	Policy   reload.Policy
	Strategy reload.Strategy
	Window   *coalesce.Window
	Recorder recorder.EventRecorder
	Metrics  *metrics.Metrics
	// Workers is how many workloads of this kind reconcile at once.
	Workers int
	Now     func() time.Time
}

// observed is one source that concerns the workload, as it is now.
type observed struct {
	obj  client.Object
	hash string
	ref  *source.Ref
}

// Reconcile implements reconcile.Reconciler.
func (r *WorkloadReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := r.reconcile(ctx, req)
	if err != nil {
		r.Metrics.Errors.WithLabelValues(r.Kind.Name()).Inc()
	}
	return res, err
}

func (r *WorkloadReconciler) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	started := r.Now()
	obj := r.Kind.NewObject()
	k := r.windowKey(req.NamespacedName)
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.Window.Done(k, started)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		r.Window.Done(k, started)
		return reconcile.Result{}, nil
	}
	logger := log.FromContext(ctx)
	tpl := r.Kind.PodTemplate(obj)

	rules, errs := reload.ParseRules(r.Policy.Keys, obj.GetAnnotations(), tpl.Annotations)
	if len(errs) > 0 {
		msg := errors.Join(errs...).Error()
		logger.Info("invalid reload annotation; the valid rules still apply", "error", msg)
		r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonInvalidAnnotation, "Validate", "%s", msg)
	}

	sources, err := r.concerned(ctx, obj, tpl, &rules)
	if err != nil {
		return reconcile.Result{}, err
	}
	hashes := make(map[source.ID]string, len(sources))
	for id, o := range sources {
		hashes[id] = o.hash
	}
	last, hasRecord := r.record(ctx, obj)
	changed, next := reload.Diff(last, hasRecord, hashes)
	if len(changed) == 0 && next.Equal(last) && (hasRecord || len(next) == 0) {
		logger.V(2).Info("sources unchanged", "sources", len(next))
		r.Window.Done(k, started)
		return reconcile.Result{}, nil
	}
	if len(changed) > 0 {
		if wait := r.Window.Wait(k); wait > 0 {
			logger.V(1).Info("waiting for changes to settle", "wait", wait.String(), "changed", len(changed))
			return reconcile.Result{RequeueAfter: wait}, nil
		}
	}

	original := obj.DeepCopyObject().(client.Object)
	changes := make([]reload.Change, 0, len(changed))
	for _, id := range changed {
		o := sources[id]
		changes = append(changes, reload.Change{ID: id, Hash: o.hash, Containers: reload.TargetContainers(o.ref, &tpl.Spec)})
	}
	r.Strategy.Apply(tpl, obj.GetNamespace(), changes, started)
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[reload.RecordAnnotation] = next.Encode()
	obj.SetAnnotations(ann)

	if err := r.Client.Patch(ctx, obj, client.StrategicMergeFrom(original), client.FieldOwner(FieldOwner)); err != nil {
		if len(changes) > 0 {
			r.Metrics.Reloaded(obj.GetNamespace(), false)
			r.Recorder.Eventf(original, sources[changed[0]].obj, corev1.EventTypeWarning, ReasonReloadFail, "Reload",
				"Reload after change of %s failed: %v", describe(changes), err)
		}
		return reconcile.Result{}, fmt.Errorf("patch %s: %w", k, err)
	}
	if first, ok := r.Window.FirstChange(k); ok && len(changes) > 0 {
		r.Metrics.ChangeToPatch.Observe(r.Now().Sub(first).Seconds())
	}
	r.Window.Done(k, started)
	if len(changes) == 0 {
		logger.V(1).Info("recorded source hashes", "record", next.Encode())
		return reconcile.Result{}, nil
	}
	r.Metrics.Reloaded(obj.GetNamespace(), true)
	for _, ch := range changes {
		logger.Info("reloaded", "source", ch.ID.String(), "hash", ch.Hash, "containers", ch.Containers)
	}
	r.Recorder.Eventf(obj, sources[changed[0]].obj, corev1.EventTypeNormal, ReasonReloaded, "Reload",
		"Reloaded %s %s after change of %s", r.Kind.Name(), obj.GetName(), describe(changes))
	return reconcile.Result{}, nil
}

// windowKey names a workload in the coalescing window.
func (r *WorkloadReconciler) windowKey(nn types.NamespacedName) string {
	return r.Kind.Name() + "/" + nn.String()
}

// concerned returns the existing sources that concern the workload, by ID.
func (r *WorkloadReconciler) concerned(ctx context.Context, obj client.Object, tpl *corev1.PodTemplateSpec, rules *reload.Rules) (map[source.ID]observed, error) {
	ns := obj.GetNamespace()
	refs := map[source.ID]*source.Ref{}
	for _, ref := range source.Refs(&tpl.Spec) {
		refs[ref.ID] = &ref
	}
	out := map[source.ID]observed{}
	for _, st := range r.Sources {
		consider := func(o client.Object) {
			id := source.ID{Kind: st.Kind, Name: o.GetName()}
			ref := refs[id]
			ok, _ := r.Policy.Concerns(rules, reload.Candidate{ID: id, Annotations: o.GetAnnotations(), Referenced: ref != nil})
			if ok {
				out[id] = observed{obj: o, hash: st.contentHash(o), ref: ref}
			}
		}
		if rules.HasNamed(st.Kind) {
			// Named entries are regular expressions: match them against the namespace's sources.
			list := st.NewList()
			if err := r.Client.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
				return nil, fmt.Errorf("list %ss in %s: %w", st.Kind, ns, err)
			}
			if err := forEach(list, consider); err != nil {
				return nil, err
			}
		}
		for id := range refs {
			if id.Kind != st.Kind {
				continue
			}
			if _, done := out[id]; done {
				continue
			}
			o := st.NewObject()
			err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: id.Name}, o)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("get %s %s/%s: %w", st.Kind, ns, id.Name, err)
			}
			consider(o)
		}
	}
	return out, nil
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

func describe(changes []reload.Change) string {
	parts := make([]string, len(changes))
	for i, ch := range changes {
		parts[i] = ch.ID.Kind.Title() + " " + ch.ID.Name
	}
	return strings.Join(parts, ", ")
}
