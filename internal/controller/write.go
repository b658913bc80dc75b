package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/workload"
)

// podTemplate is where a workload's pod template lives: in the workload itself, or in the
// Deployment an Argo Rollout refers to with workloadRef.
type podTemplate struct {
	tpl *corev1.PodTemplateSpec
	// owner is a copy of the referenced Deployment, holding the changes; nil for the
	// workload's own template.
	owner, ownerOriginal *appsv1.Deployment
}

func (t podTemplate) changed() bool {
	return t.owner != nil && !equality.Semantic.DeepEqual(t.owner, t.ownerOriginal)
}

func (r *WorkloadReconciler) template(ctx context.Context, obj client.Object) (podTemplate, error) {
	ref, ok := r.Kind.(workload.Referencing)
	if !ok || ref.TemplateRef(obj) == "" {
		return podTemplate{tpl: r.Kind.PodTemplate(obj)}, nil
	}
	d := &appsv1.Deployment{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: ref.TemplateRef(obj)}, d)
	if apierrors.IsNotFound(err) {
		return podTemplate{tpl: &corev1.PodTemplateSpec{}}, nil
	}
	if err != nil {
		return podTemplate{}, fmt.Errorf("get workloadRef Deployment: %w", err)
	}
	owner := d.DeepCopy()
	return podTemplate{tpl: &owner.Spec.Template, owner: owner, ownerOriginal: d}, nil
}

// apply writes the changes into the copy of the workload (or its referenced Deployment). It
// reports whether the pods will roll: a change that leaves the template as it was reloads
// nothing, and is not reported as a reload.
func (r *WorkloadReconciler) apply(ctx context.Context, updated client.Object, w seen, changes []reload.Change) bool {
	if w.restart == restartEvict {
		return true // the template stays; markEviction starts the restart
	}
	if rs, ok := r.Kind.(workload.Restartable); ok && r.restarts(ctx, updated) {
		rs.Restart(updated, r.Now())
		return true
	}
	tpl := r.Kind.PodTemplate(updated)
	if w.tw.owner != nil {
		tpl = w.tw.tpl
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

// skip says why a reload of obj must not happen, if it must not.
func (r *WorkloadReconciler) skip(obj client.Object, s settings) reload.Skip {
	if rc, ok := r.Kind.(workload.Recreated); ok && rc.Finished(obj) &&
		!optedIn(obj, reload.RecreateFinishedAnnotation, s.recreateFinishedJobs) {
		return reload.Skip{Reason: "finished-job", Why: fmt.Sprintf("the Job has finished and re-running finished Jobs is turned off (annotation %s: \"false\", a ReloaderConfig's recreateFinishedJobs: false, or --recreate-finished-jobs=false)", reload.RecreateFinishedAnnotation)}
	}
	return reload.Skip{}
}

// optedIn reads a per-workload "true"/"false" annotation that overrides a flag's default.
func optedIn(obj client.Object, key string, dflt bool) bool {
	if b, err := strconv.ParseBool(strings.TrimSpace(obj.GetAnnotations()[key])); err == nil {
		return b
	}
	return dflt
}

// write stores the updated workload: one patch for most kinds; a replacement for Jobs; for a
// CronJob that runs on reload, first the Job, under a name derived from the new state, so that
// a retry never starts a second one.
//
// A reload, or a first record, is written only onto the copy it was planned from (the patch
// tests what the decision read, guard.go): a reconcile that read a stale copy gets a conflict
// and plans again from the new one, so it never rolls a workload a second time, nor records
// over a record it did not see; a status write meanwhile is no conflict.
func (r *WorkloadReconciler) write(ctx context.Context, obj, updated client.Object, w seen, changes []reload.Change, next reload.Record) error {
	tw := w.tw
	if tw.changed() {
		patch := client.StrategicMergeFrom(tw.ownerOriginal)
		if len(changes) > 0 {
			var err error
			if patch, err = guardedOr(tw.ownerOriginal, tw.owner, client.StrategicMergeFrom(tw.ownerOriginal, client.MergeFromWithOptimisticLock{}), r.Policy.Keys); err != nil {
				return err
			}
		}
		if err := r.Client.Patch(ctx, tw.owner, patch, client.FieldOwner(FieldOwner)); err != nil {
			return fmt.Errorf("patch workloadRef Deployment %s: %w", tw.owner.Name, guardFailed(err, schema.GroupResource{Group: "apps", Resource: "deployments"}, tw.owner.Name))
		}
	}
	if rc, ok := r.Kind.(workload.Recreated); ok && len(changes) > 0 {
		r.Metrics.Actions.WithLabelValues(r.Kind.Name(), "replace-job").Inc()
		return r.replace(ctx, obj, rc.Replacement(updated))
	}
	if sc, ok := r.Kind.(workload.Scheduled); ok && len(changes) > 0 &&
		optedIn(updated, reload.RunOnReloadAnnotation, w.settings.runCronJobs) && !sc.Suspended(updated) {
		job := sc.RunNow(updated, runName(obj, next))
		// Nothing is deleted first, so no dry run; a refused blockOwnerDeletion is still let go.
		if _, err := r.createAdmitted(ctx, job, false); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("start Job from CronJob: %w", err)
		}
		r.Metrics.Actions.WithLabelValues(r.Kind.Name(), "run-cronjob").Inc()
		log.FromContext(ctx).Info("started Job from reloaded CronJob", "job", job.GetName())
	}
	_, recorded := obj.GetAnnotations()[reload.RecordAnnotation]
	patch := r.Kind.PatchFrom(obj)
	if locked := patch.Type() != types.StrategicMergePatchType; locked || len(changes) > 0 || !recorded {
		// Custom kinds' merge patches replace whole lists, and so are guarded always.
		if !locked {
			patch = client.StrategicMergeFrom(obj, client.MergeFromWithOptimisticLock{})
		}
		var err error
		if patch, err = guardedOr(obj, updated, patch, r.Policy.Keys); err != nil {
			return err
		}
	}
	err := r.Client.Patch(ctx, updated, patch, client.FieldOwner(FieldOwner))
	return guardFailed(err, schema.GroupResource{Resource: r.Kind.Name()}, obj.GetName())
}

// runName names the Job a CronJob reload starts: the same for every retry of one reload.
func runName(cronJob client.Object, next reload.Record) string {
	sum := sha256.Sum256([]byte(string(cronJob.GetUID()) + "/" + strconv.FormatInt(cronJob.GetGeneration(), 10) + "/" + next.Encode()))
	name := cronJob.GetName()
	if len(name) > 42 {
		name = name[:42]
	}
	return strings.TrimRight(name, "-.") + "-reload-" + hex.EncodeToString(sum[:4])
}
