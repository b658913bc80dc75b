// Package generic reloads the generic targets of ReloaderConfigs (spec.genericTargets):
// objects of any kind whose pod template an operator derives pods from.
package generic

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	shared "github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
	"github.com/reloader-operator/reloader/internal/shard"
)

// Annotations of generic targets: the pod template's (its change rolls the pods the
// operator derives from it) and the object's record of the sources' hash it was patched for.
const (
	GenericTemplateAnnotation = "reloader.dev/last-reloaded"
	// Not reloader.dev/source-hashes: a generic target may be of a workload kind too, whose
	// record (per source) the workload reconcilers keep there.
	GenericRecordAnnotation = "reloader.dev/generic-source-hash"
)

// genericRetry is how soon a refused or missing generic target is looked at again: an admin
// granting the rule, or an operator creating its CR, sends no event reloader watches.
const genericRetry = time.Minute

// Reconciler patches the pod templates of generic targets (spec.genericTargets of
// ReloaderConfigs): objects of any kind, read and written live with unstructured clients, as
// far as reloader's ServiceAccount may (it asks first, and says what is missing).
type Reconciler struct {
	// Client reads the configs (cached) and writes targets, statuses and access reviews.
	Client client.Client
	// APIReader reads sources and targets live: a target's kind has no informer.
	APIReader client.Reader
	Configs   *reloaderconfig.Cache
	Recorder  recorder.EventRecorder
	Sources   []shared.SourceType
	Now       func() time.Time
	// Shard is WorkloadReconciler.Shard: under --shards, only the namespace's owner acts.
	Shard func(namespace string) (own, ready bool)
}

// Reconcile brings each generic target of one config to the current hash of its sources.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	// As the workload reconcilers: another replica's, or its targets not listed yet.
	if skip, wait := shard.Gate(r.Shard, req.Namespace); skip || wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	cfg := &v1alpha1.ReloaderConfig{}
	if err := r.Client.Get(ctx, req.NamespacedName, cfg); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	c := r.Configs.Get(cfg)
	if len(c.Generic) == 0 {
		return reconcile.Result{}, r.dropAccessCondition(ctx, cfg)
	}
	hash, err := r.sourcesHash(ctx, cfg)
	if err != nil {
		return reconcile.Result{}, err
	}
	var denied []string
	retry := false
	for _, t := range c.Generic {
		if t.OwnerOf != nil {
			name, problem, err := r.topOwner(ctx, cfg.Namespace, t)
			if err != nil {
				return reconcile.Result{}, err
			}
			if problem != "" {
				r.Recorder.Eventf(cfg, nil, corev1.EventTypeWarning, "GenericTargetMissing", "Reload",
					"generic target %s: %s", t.Describe(), problem)
				retry = true
				continue
			}
			t.Name = name
		}
		missing, err := r.access(ctx, cfg.Namespace, t)
		if err != nil {
			return reconcile.Result{}, err
		}
		if missing != "" {
			denied = append(denied, missing)
			continue
		}
		again, err := r.apply(ctx, cfg, t, hash)
		if err != nil {
			return reconcile.Result{}, err
		}
		retry = retry || again
	}
	if err := r.setAccessCondition(ctx, cfg, denied); err != nil {
		return reconcile.Result{}, err
	}
	if len(denied) > 0 || retry {
		return reconcile.Result{RequeueAfter: genericRetry}, nil
	}
	return reconcile.Result{}, nil
}

// apply brings one target to hash: on first sight it only records the hash (no restart), then
// it patches the template's annotation and the record once per new hash. again is true when
// the target could not be read and is worth another look.
func (r *Reconciler) apply(ctx context.Context, cfg *v1alpha1.ReloaderConfig, t reloaderconfig.GenericTarget, hash string) (again bool, err error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(t.GVK)
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: t.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
			r.Recorder.Eventf(cfg, nil, corev1.EventTypeWarning, "GenericTargetMissing", "Reload",
				"generic target %s %s: %v", t.GVK.Kind, t.Name, err)
			return true, nil
		}
		return false, fmt.Errorf("get %s %s/%s: %w", t.GVK.Kind, cfg.Namespace, t.Name, err)
	}
	if tpl, ok, _ := unstructured.NestedMap(obj.Object, t.Path...); !ok || tpl == nil {
		r.Recorder.Eventf(cfg, obj, corev1.EventTypeWarning, "TemplatePathMissing", "Reload",
			"generic target %s %s has no object at %s", t.GVK.Kind, t.Name, strings.Join(t.Path, "."))
		return false, nil
	}
	recorded := obj.GetAnnotations()[GenericRecordAnnotation]
	if recorded == hash {
		return false, nil
	}
	patch := map[string]any{"metadata": map[string]any{"annotations": map[string]any{GenericRecordAnnotation: hash}}}
	if recorded != "" {
		// Not the first sight: a source changed since the record, so the template changes.
		at := patch
		for i, seg := range t.Path {
			next := map[string]any{}
			if i == 0 && seg == "metadata" {
				next = patch["metadata"].(map[string]any)
			}
			at[seg] = next
			at = next
		}
		at["metadata"] = map[string]any{"annotations": map[string]any{GenericTemplateAnnotation: hash}}
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return false, err
	}
	if err := r.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, body), client.FieldOwner(shared.FieldOwner)); err != nil {
		return false, fmt.Errorf("patch %s %s/%s: %w", t.GVK.Kind, cfg.Namespace, t.Name, err)
	}
	if recorded != "" {
		log.FromContext(ctx).Info("reloaded generic target", "kind", t.GVK.Kind, "name", t.Name, "hash", hash)
		r.Recorder.Eventf(cfg, obj, corev1.EventTypeNormal, "Reloaded", "Reload",
			"patched %s %s at %s.metadata.annotations", t.GVK.Kind, t.Name, strings.Join(t.Path, "."))
	}
	return false, nil
}

// topOwner follows the controller ownerReferences up from the workload t.OwnerOf names, at
// most v1alpha1.MaxOwnerDepth of them, and returns the last object's name when it is of t's
// kind; problem says why not, for the user.
func (r *Reconciler) topOwner(ctx context.Context, ns string, t reloaderconfig.GenericTarget) (name, problem string, err error) {
	gvk, name := *t.OwnerOf, t.OwnerOfName
	for hop := 0; ; hop++ {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(gvk)
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apimeta.IsNoMatchError(err) {
				return "", fmt.Sprintf("reading %s %s: %v", gvk.Kind, name, err), nil
			}
			return "", "", fmt.Errorf("get %s %s/%s: %w", gvk.Kind, ns, name, err)
		}
		ref := metav1.GetControllerOf(obj)
		if ref == nil {
			break
		}
		if hop == v1alpha1.MaxOwnerDepth {
			return "", fmt.Sprintf("more than %d controller owners above %s %s", v1alpha1.MaxOwnerDepth, t.OwnerOf.Kind, t.OwnerOfName), nil
		}
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			return "", fmt.Sprintf("%s %s has an owner of apiVersion %q", gvk.Kind, name, ref.APIVersion), nil
		}
		gvk, name = gv.WithKind(ref.Kind), ref.Name
	}
	if gvk.GroupKind() != t.GVK.GroupKind() {
		return "", fmt.Sprintf("the top-level owner is %s %s, not a %s", gvk.Kind, name, t.GVK.GroupKind()), nil
	}
	return name, "", nil
}

// access asks the API server whether reloader may get and patch the target; missing names
// the rule to grant, empty when both are allowed.
func (r *Reconciler) access(ctx context.Context, ns string, t reloaderconfig.GenericTarget) (missing string, err error) {
	mapping, err := r.Client.RESTMapper().RESTMapping(t.GVK.GroupKind(), t.GVK.Version)
	if err != nil {
		if apimeta.IsNoMatchError(err) {
			return fmt.Sprintf("%s: the API server serves no such kind", t.GVK), nil
		}
		return "", fmt.Errorf("map %s: %w", t.GVK, err)
	}
	var refused []string
	for _, verb := range []string{"get", "patch"} {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb,
				Group: mapping.Resource.Group, Resource: mapping.Resource.Resource, Name: t.Name}}}
		if err := r.Client.Create(ctx, review); err != nil {
			return "", fmt.Errorf("review access to %s: %w", mapping.Resource, err)
		}
		if !review.Status.Allowed {
			refused = append(refused, verb)
		}
	}
	if len(refused) == 0 {
		return "", nil
	}
	return fmt.Sprintf("apiGroups: [%q], resources: [%q], verbs: [%s] (for %s %s)", mapping.Resource.Group,
		mapping.Resource.Resource, strings.Join(refused, ", "), t.GVK.Kind, t.Name), nil
}

// setAccessCondition writes the GenericTargetsAccessible condition when it changes, and a
// Warning Event when access turns refused.
func (r *Reconciler) setAccessCondition(ctx context.Context, cfg *v1alpha1.ReloaderConfig, denied []string) error {
	cond := metav1.Condition{Type: v1alpha1.ConditionGenericTargets, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ReasonAccessGranted, Message: "reloader may get and patch every generic target", ObservedGeneration: cfg.Generation}
	if len(denied) > 0 {
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonAccessDenied
		cond.Message = "grant reloader's ServiceAccount " + strings.Join(denied, "; ")
		if len(cond.Message) > 1024 {
			cond.Message = cond.Message[:1021] + "..."
		}
	}
	if was := apimeta.FindStatusCondition(cfg.Status.Conditions, cond.Type); was != nil &&
		was.Status == cond.Status && was.Reason == cond.Reason && was.Message == cond.Message && was.ObservedGeneration == cond.ObservedGeneration {
		return nil
	}
	if cond.Status == metav1.ConditionFalse {
		r.Recorder.Eventf(cfg, nil, corev1.EventTypeWarning, v1alpha1.ReasonAccessDenied, "Reload", "%s", cond.Message)
	}
	base := cfg.DeepCopy()
	cond.LastTransitionTime = metav1.NewTime(r.Now()).Rfc3339Copy()
	apimeta.SetStatusCondition(&cfg.Status.Conditions, cond)
	// Optimistic lock: the list is replaced whole, and the status controller writes it too.
	patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	if err := r.Client.Status().Patch(ctx, cfg, patch, client.FieldOwner(shared.FieldOwner)); err != nil {
		return fmt.Errorf("patch status of ReloaderConfig %s/%s: %w", cfg.Namespace, cfg.Name, err)
	}
	return nil
}

// dropAccessCondition removes GenericTargetsAccessible from a config without generic targets.
func (r *Reconciler) dropAccessCondition(ctx context.Context, cfg *v1alpha1.ReloaderConfig) error {
	if apimeta.FindStatusCondition(cfg.Status.Conditions, v1alpha1.ConditionGenericTargets) == nil {
		return nil
	}
	base := cfg.DeepCopy()
	apimeta.RemoveStatusCondition(&cfg.Status.Conditions, v1alpha1.ConditionGenericTargets)
	patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	if err := r.Client.Status().Patch(ctx, cfg, patch, client.FieldOwner(shared.FieldOwner)); err != nil {
		return fmt.Errorf("patch status of ReloaderConfig %s/%s: %w", cfg.Namespace, cfg.Name, err)
	}
	return nil
}

// sourcesHash is the hash of the config's sources chosen by name (of their listed keys, when
// keys are set), read live; a missing source counts as absent.
func (r *Reconciler) sourcesHash(ctx context.Context, cfg *v1alpha1.ReloaderConfig) (string, error) {
	h := sha256.New()
	for _, s := range cfg.Spec.Sources[:min(len(cfg.Spec.Sources), v1alpha1.MaxSources)] {
		if s.Name == "" {
			continue
		}
		var data map[string][]byte
		key := client.ObjectKey{Namespace: cfg.Namespace, Name: s.Name}
		var err error
		switch s.Kind {
		case "ConfigMap":
			cm := &corev1.ConfigMap{}
			if err = r.APIReader.Get(ctx, key, cm); err == nil {
				data = map[string][]byte{}
				for k, v := range cm.Data {
					data[k] = []byte(v)
				}
				for k, v := range cm.BinaryData {
					data[k] = v
				}
			}
		case "Secret":
			sec := &corev1.Secret{}
			if err = r.APIReader.Get(ctx, key, sec); err == nil {
				data = sec.Data
			}
		default:
			continue
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return "", fmt.Errorf("get %s %s: %w", s.Kind, key, err)
		}
		fmt.Fprintf(h, "%s/%s\x00", s.Kind, s.Name)
		if data == nil {
			h.Write([]byte("absent\x00"))
			continue
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			if len(s.Keys) == 0 || slices.Contains(s.Keys, k) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(h, "%s=%d:", k, len(data[k]))
			h.Write(data[k])
		}
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
