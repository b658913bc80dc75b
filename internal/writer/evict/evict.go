package evict

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/report"
	"github.com/reloader-operator/reloader/internal/workload"
	"github.com/reloader-operator/reloader/internal/writer"
)

// The evict restart strategy (reloader.dev/restart-strategy: evict) restarts a workload's pods
// through the Eviction API, for workloads whose pod template an operator resets. The reload
// itself is written as for any strategy, record included, in one patch that leaves the
// template alone and adds reload.EvictingAnnotation: the pods created before its time are to
// go. Each later reconcile makes one step (reload.PlanEviction): evict the oldest such pod
// once every pod is Ready again, wait, or remove the annotation when none is left. The state
// is on the workload and in its pods, so a reloader that restarts carries on, and a pod
// created after the restart began is never evicted by it.

// Event reasons of the evict strategy.
const (
	ReasonEvicting              = "EvictingPods"
	ReasonEvictionBlocked       = "EvictionBlocked"
	ReasonRestarted             = "Restarted"
	ReasonEvictStrategyDisabled = "EvictStrategyDisabled"
)

// evictRetry is the wait after an eviction a PodDisruptionBudget refused, unless the API
// server suggests another.
const evictRetry = 5 * time.Second

// Restarter carries out the evict restart strategy for one kind of workload.
type Restarter struct {
	Client client.Client
	// APIReader reads the pods past the cache (they are not cached); nil reads through Client.
	APIReader client.Reader
	Kind      workload.Kind
	// Enabled runs the strategy (--enable-evict-strategy); without it a workload that asks for
	// it is told, and its reloads wait.
	Enabled bool
	Now     func() time.Time
	Report  writer.Reporter
}

// Mode is how a workload's pods restart on reload.
type Mode int

const (
	// Rollout changes the pod template, and the workload's controller rolls the pods.
	Rollout Mode = iota
	// Evict leaves the template and evicts the pods one at a time.
	Evict
	// Off: evict is asked for, but --enable-evict-strategy is not set.
	Off
)

// ModeOf reads the workload's restart strategy. Bad input is reported (only when a reload
// is due, the moment it matters) and the template is changed as usual.
func (e *Restarter) ModeOf(ctx context.Context, obj client.Object, reloads bool) Mode {
	evict, err := reload.ParseRestartStrategy(obj.GetAnnotations()[reload.RestartStrategyAnnotation])
	if _, evictable := e.Kind.(workload.Evictable); evict && !evictable {
		evict, err = false, fmt.Errorf("annotation %s: a %s can't be restarted by eviction; changing the pod template", reload.RestartStrategyAnnotation, e.Kind.Name())
	}
	switch {
	case err != nil:
		if reloads {
			e.Report.Invalid(ctx, obj, err)
		}
		return Rollout
	case !evict:
		return Rollout
	case !e.Enabled:
		return Off
	}
	return Evict
}

// Held reports a reload held back because the evict strategy is not enabled (Off). Nothing
// is written, record included: once it is enabled, the change is still due.
func (e *Restarter) Held(ctx context.Context, obj client.Object) (reconcile.Result, string, error) {
	log.FromContext(ctx).Info("reload due, but the evict restart strategy is not enabled")
	e.Report.Event(obj, nil, true, ReasonEvictStrategyDisabled, "Reload", fmt.Sprintf("%s %s asks for %s: evict, which this reloader does not run: start it with --enable-evict-strategy (chart value reloader.enableEvictStrategy), or remove the annotation; the reload waits", e.Kind.Name(), obj.GetName(), reload.RestartStrategyAnnotation))
	return reconcile.Result{}, metrics.OutcomeHeld, nil
}

// Mark starts an evict restart on the copy to write, when the reload (reloaded, recording
// next) is one.
func (e *Restarter) Mark(updated client.Object, mode Mode, reloaded []reload.Change, next reload.Record) {
	if mode == Evict && len(reloaded) > 0 {
		ann := updated.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[reload.EvictingAnnotation] = reload.StartEvicting(e.Now(), next).Encode()
		updated.SetAnnotations(ann)
	}
}

// Step makes one step of the workload's evict restart, if one is under way, after the
// reconcile's own execution res, outcome: the work of a restart spans reconciles, and its
// state is on the workload and its pods.
func (e *Restarter) Step(ctx context.Context, obj client.Object, mode Mode, res reconcile.Result, outcome string) (reconcile.Result, string, error) {
	if outcome == metrics.OutcomeReloaded && mode == Evict {
		// Just started; the next reconcile reads the copy written.
		e.Report.Event(obj, nil, false, ReasonEvicting, "Evict", fmt.Sprintf("Restarting %s %s by eviction (strategy evict): its pods go one at a time, the pod template is left as it is", e.Kind.Name(), obj.GetName()))
		return sooner(res, time.Second), outcome, nil
	}
	v, ok := obj.GetAnnotations()[reload.EvictingAnnotation]
	if !ok {
		return res, outcome, nil
	}
	logger := log.FromContext(ctx)
	if mode != Evict {
		logger.Info("restart strategy is no longer evict; ending the evict restart")
		return res, outcome, e.endEviction(ctx, obj)
	}
	st, err := reload.ParseEvicting(v, e.Now())
	if err != nil {
		e.Report.Invalid(ctx, obj, err)
		return res, outcome, e.endEviction(ctx, obj)
	}
	if st.Record != reload.RecordDigest(obj.GetAnnotations()[reload.RecordAnnotation]) {
		// Not the restart of the record on the workload: stale, or not written by reloader.
		logger.Info("evict restart does not belong to the current record; ending it")
		return res, outcome, e.endEviction(ctx, obj)
	}
	ev := e.Kind.(workload.Evictable)
	pods, err := e.podsOf(ctx, obj, ev)
	if what, refused := writer.RBACRefusal(err); refused {
		return e.evictRefused(ctx, obj, what, err), outcome, nil
	}
	if err != nil {
		return res, outcome, err
	}
	state := podStates(pods)
	step := reload.PlanEviction(st, state, ev.Desired(obj), e.Now())
	switch {
	case step.Done:
		if err := e.endEviction(ctx, obj); err != nil {
			return res, outcome, err
		}
		e.Report.Action(e.Kind.Name(), "evict-done")
		e.Report.Event(obj, nil, false, ReasonRestarted, "Evict", fmt.Sprintf("Restarted %s %s by eviction: no pod created before %s is left", e.Kind.Name(), obj.GetName(), st.Since.Format(time.RFC3339)))
		return res, outcome, nil
	case step.Evict == "":
		logger.V(1).Info("evict restart waiting", "why", step.Why, "left", step.Left)
		return sooner(res, step.Wait), outcome, nil
	}
	return e.evict(ctx, obj, pods, step, res, outcome)
}

// evict evicts the pod step names, exactly that one (its UID is a precondition: a
// StatefulSet's replacement has the same name).
func (e *Restarter) evict(ctx context.Context, obj client.Object, pods []corev1.Pod, step reload.EvictStep, res reconcile.Result, outcome string) (reconcile.Result, string, error) {
	var pod corev1.Pod
	for _, p := range pods {
		if p.Name == step.Evict {
			pod = p
		}
	}
	eviction := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}},
	}
	err := e.Client.SubResource("eviction").Create(ctx, &pod, eviction)
	switch {
	case apierrors.IsTooManyRequests(err):
		wait := evictRetry
		if s, ok := apierrors.SuggestsClientDelay(err); ok && s > 0 && time.Duration(s)*time.Second < time.Minute {
			wait = time.Duration(s) * time.Second
		}
		e.Report.Event(obj, nil, false, ReasonEvictionBlocked, "Evict", fmt.Sprintf("Eviction of pod %s refused for now (%v); retrying in %s", pod.Name, err, wait))
		return sooner(res, wait), outcome, nil
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Gone or replaced meanwhile: look again.
		return sooner(res, time.Second), outcome, nil
	case err != nil:
		if what, ok := writer.RBACRefusal(err); ok {
			return e.evictRefused(ctx, obj, what, err), outcome, nil
		}
		return res, outcome, fmt.Errorf("evict pod %s: %w", pod.Name, err)
	}
	e.Report.Action(e.Kind.Name(), "evict-pod")
	log.FromContext(ctx).Info("evicted pod", "pod", pod.Name, "uid", pod.UID, "left", step.Left-1)
	e.Report.Event(obj, nil, false, ReasonEvicting, "Evict", fmt.Sprintf("Evicted pod %s to restart it with the new configuration (strategy evict); %d more to go", pod.Name, step.Left-1))
	return sooner(res, time.Second), metrics.OutcomeReloaded, nil
}

// evictRefusedRetry is how long a restart that reloader's RBAC refuses waits before it tries
// again: it carries on by itself once the RBAC is granted.
const evictRefusedRetry = time.Minute

// evictRefused reports a step of an evict restart that reloader's RBAC does not allow.
func (e *Restarter) evictRefused(ctx context.Context, obj client.Object, what string, err error) reconcile.Result {
	log.FromContext(ctx).Info("WARNING: evict restart refused by RBAC; trying again later", "refused", what, "error", err.Error(), "retryIn", evictRefusedRetry.String())
	e.Report.Event(obj, nil, true, report.ReasonReloadFail, "Evict", fmt.Sprintf("Restart by eviction refused: reloader's RBAC does not allow %s; the chart grants it with reloader.enableEvictStrategy (--enable-evict-strategy). Trying again in %s", what, evictRefusedRetry))
	return reconcile.Result{RequeueAfter: evictRefusedRetry}
}

// endEviction removes the evict restart's state from the workload, in one patch on the copy
// read: a restart written meanwhile is not removed.
func (e *Restarter) endEviction(ctx context.Context, obj client.Object) error {
	updated := obj.DeepCopyObject().(client.Object)
	ann := updated.GetAnnotations()
	delete(ann, reload.EvictingAnnotation)
	updated.SetAnnotations(ann)
	patch := client.MergeFromWithOptions(obj, client.MergeFromWithOptimisticLock{})
	if err := e.Client.Patch(ctx, updated, patch, client.FieldOwner(writer.FieldOwner)); err != nil {
		return fmt.Errorf("end evict restart: %w", err)
	}
	return nil
}

// podsOf reads the workload's pods from the API server (pods are not cached: only a workload
// restarting reads them): those its selector finds that it controls, directly or through a
// ReplicaSet it controls.
func (e *Restarter) podsOf(ctx context.Context, obj client.Object, ev workload.Evictable) ([]corev1.Pod, error) {
	reader := e.APIReader
	if reader == nil {
		reader = e.Client
	}
	sel, err := metav1.LabelSelectorAsSelector(ev.Selector(obj))
	if err != nil {
		return nil, fmt.Errorf("selector: %w", err)
	}
	in := []client.ListOption{client.InNamespace(obj.GetNamespace()), client.MatchingLabelsSelector{Selector: sel}}
	pods := &corev1.PodList{}
	if err := reader.List(ctx, pods, in...); err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	owners := map[types.UID]bool{obj.GetUID(): true}
	viaReplicaSet := false
	for _, p := range pods.Items {
		if c := metav1.GetControllerOf(&p); c != nil && c.Kind == "ReplicaSet" {
			viaReplicaSet = true
		}
	}
	if viaReplicaSet {
		rss := &metav1.PartialObjectMetadataList{}
		rss.SetGroupVersionKind(schemaReplicaSetList)
		if err := reader.List(ctx, rss, in...); err != nil {
			return nil, fmt.Errorf("list replicasets: %w", err)
		}
		for _, rs := range rss.Items {
			if c := metav1.GetControllerOf(&rs); c != nil && c.UID == obj.GetUID() {
				owners[rs.UID] = true
			}
		}
	}
	out := pods.Items[:0]
	for _, p := range pods.Items {
		if c := metav1.GetControllerOf(&p); c != nil && owners[c.UID] {
			out = append(out, p)
		}
	}
	return out, nil
}

// podStates is what reload.PlanEviction reads of each pod.
func podStates(pods []corev1.Pod) []reload.EvictPod {
	state := make([]reload.EvictPod, 0, len(pods))
	for _, p := range pods {
		state = append(state, reload.EvictPod{Name: p.Name, Created: p.CreationTimestamp.Time, Ready: podReady(p), Terminating: p.DeletionTimestamp != nil})
	}
	return state
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// sooner returns res, coming back after d at the latest.
func sooner(res reconcile.Result, d time.Duration) reconcile.Result {
	if res.RequeueAfter <= 0 || d < res.RequeueAfter {
		res.RequeueAfter = d
	}
	return res
}

var schemaReplicaSetList = appsv1.SchemeGroupVersion.WithKind("ReplicaSetList")
