// Package generic reloads the generic targets of ReloaderConfigs (spec.genericTargets):
// objects of any kind whose pod template an operator derives pods from.
package generic

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/controller/lazywatch"
	"github.com/reloader-operator/reloader/internal/gate"
	"github.com/reloader-operator/reloader/internal/gate/rate"
	"github.com/reloader-operator/reloader/internal/hashkey"
	"github.com/reloader-operator/reloader/internal/lookup"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/pace"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
	"github.com/reloader-operator/reloader/internal/report"
	"github.com/reloader-operator/reloader/internal/shard"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/writer"
)

// Annotations of generic targets: the pod template's (its change rolls the pods the
// operator derives from it), and the object's record, per ReloaderConfig, of the sources'
// hash it was patched for (RecordAnnotation).
const (
	GenericTemplateAnnotation = "reloader.dev/last-reloaded"
	// LegacyRecordAnnotation is the one record of earlier releases, shared by every config
	// naming the object; it is removed with the first per-config record. Not
	// reloader.dev/source-hashes: a generic target may be of a workload kind too.
	LegacyRecordAnnotation = "reloader.dev/generic-source-hash"
	recordPrefix           = LegacyRecordAnnotation + "-"
)

// RecordAnnotation is the record of the ReloaderConfig cfg on its generic targets: keyed by
// the config's namespace and name (a digest of them, to fit an annotation name), so that two
// configs naming one object each keep their own.
func RecordAnnotation(cfg client.Object) string {
	sum := sha256.Sum256([]byte(cfg.GetNamespace() + "/" + cfg.GetName()))
	return recordPrefix + hex.EncodeToString(sum[:8])
}

// Event reasons of generic targets, beside the workloads' (Reloaded, ReloadNotified,
// ReloadHeld, ApprovalPending).
const (
	ReasonTargetMissing       = "GenericTargetMissing"
	ReasonTemplatePathMissing = "TemplatePathMissing"
)

// HookKind is the Kind the generic targets' reconciles of a config are told to
// metrics.Metrics.Hook as; their Name is the config's.
const HookKind = "ReloaderConfig/generic"

// genericRetry is how soon a refused or missing generic target is looked at again: an admin
// granting the rule, or an operator creating its CR, sends no event reloader watches.
const genericRetry = time.Minute

// Reconciler patches the pod templates of generic targets (spec.genericTargets of
// ReloaderConfigs): objects of the kinds --generic-target-kinds allows, in the config's own
// namespace, read and written live with unstructured clients, as far as reloader's
// ServiceAccount may (it asks first, and says what is missing). A due reload goes through the
// workloads' pipeline (due.go): the same gates, the same rate step, this writer, a reporter.
type Reconciler struct {
	// Client reads the configs (cached) and writes targets, statuses and access reviews.
	Client client.Client
	// APIReader reads sources and targets live: a target's kind has no informer.
	APIReader client.Reader
	Configs   *reloaderconfig.Cache
	// Reporter says what the pipeline did: Events (on the config, the target related),
	// metrics, alerts, each hold once.
	Reporter *report.Reporter
	Sources  []sourcecache.SourceType
	Now      func() time.Time
	// Shard is WorkloadReconciler.Shard: under --shards, only the namespace's owner acts.
	Shard func(namespace string) (own, ready bool)
	// Kinds is --generic-target-kinds; the zero value refuses every target.
	Kinds reloaderconfig.KindAllowlist
	// Namespaces is --namespace-selector; nil selects all.
	Namespaces labels.Selector
	// Gates are the workload reconcilers' chain (internal/app); nil holds nothing. Pacer is
	// their pacer (nil: no pacing).
	Gates gate.Chain
	Pacer *pace.Pacer
	// Workers is how many configs reconcile at once.
	Workers int
	// Metrics hears of each reconcile as it ends (Metrics.Hook, as HookKind).
	Metrics *metrics.Metrics

	// lazy are the namespace and source watches, started by the first reconcile.
	lazy lazywatch.Watches

	keys targetKeys
}

// Reconcile brings each generic target of one config to the current hash of its sources.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	defer func(started time.Time) {
		r.Metrics.Ended(metrics.Reconcile{Kind: HookKind, Namespace: req.Namespace, Name: req.Name, Outcome: metrics.OutcomeOf(err), Started: started})
	}(time.Now())
	if err := r.lazy.Start(); err != nil {
		return reconcile.Result{}, fmt.Errorf("watch the sources of ReloaderConfigs: %w", err)
	}
	// As the workload reconcilers: another replica's, or its targets not listed yet.
	if skip, wait := shard.Gate(r.Shard, req.Namespace); skip || wait > 0 {
		if skip {
			// Another replica holds it now: what this one kept of its targets goes (holds,
			// the waiting and pending gauges), as the workload reconcilers forget theirs.
			r.forgetConfig(req.Namespace, req.Name)
		}
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	cfg := &v1alpha1.ReloaderConfig{}
	if err := r.Client.Get(ctx, req.NamespacedName, cfg); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetConfig(req.Namespace, req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	c := r.Configs.Get(cfg)
	if len(c.Generic) == 0 {
		r.forgetConfig(req.Namespace, req.Name)
		return reconcile.Result{}, r.dropAccessCondition(ctx, cfg)
	}
	// As for workloads: a namespace not selected is left as it is, records included.
	if selected, err := (lookup.Lookup{Client: r.Client, Namespaces: r.Namespaces}).NamespaceSelected(ctx, cfg.Namespace); err != nil || !selected {
		if err == nil {
			r.forgetConfig(req.Namespace, req.Name)
		}
		return reconcile.Result{}, err
	}
	in, err := r.sourcesHash(ctx, cfg)
	if err != nil {
		return reconcile.Result{}, err
	}
	var denied, refused []string
	var requeue time.Duration
	seen := make([]string, 0, len(c.Generic))
	soonest := func(d time.Duration) {
		if d > 0 && (requeue == 0 || d < requeue) {
			requeue = d
		}
	}
	for _, t := range c.Generic {
		problem, missing, err := r.confine(t)
		if err != nil {
			return reconcile.Result{}, err
		}
		if problem != "" {
			refused = append(refused, problem)
			continue
		}
		if missing != "" {
			denied = append(denied, missing)
			continue
		}
		if t.OwnerOf != nil {
			name, problem, err := r.topOwner(ctx, cfg.Namespace, t)
			if err != nil {
				return reconcile.Result{}, err
			}
			if problem != "" {
				r.Reporter.Event(cfg, nil, true, ReasonTargetMissing, "Reload",
					fmt.Sprintf("generic target %s: %s", t.Describe(), problem))
				soonest(genericRetry)
				continue
			}
			t.Name = name
		}
		missing, err = r.access(ctx, cfg.Namespace, t)
		if err != nil {
			return reconcile.Result{}, err
		}
		if missing != "" {
			denied = append(denied, missing)
			continue
		}
		seen = append(seen, targetKey(cfg, t))
		wait, err := r.apply(ctx, cfg, c, t, in)
		if errors.Is(err, hashkey.ErrNotLoaded) {
			// Waiting for the install key (a quarantine record): at a steady pace, as the
			// workload reconcilers do, and without holding up the config's other targets.
			log.FromContext(ctx).V(1).Info("waiting for the install key", "target", t.Describe(), "error", err.Error())
			wait, err = hashkey.RetryEvery, nil
		}
		if err != nil {
			return reconcile.Result{}, err
		}
		soonest(wait)
	}
	// What the pipeline keeps of a target the config no longer names goes.
	r.forget(r.keys.keep(configKey(cfg.Namespace, cfg.Name), seen))
	if err := r.setAccessCondition(ctx, cfg, refused, denied); err != nil {
		return reconcile.Result{}, err
	}
	if len(denied) > 0 {
		soonest(genericRetry)
	}
	return reconcile.Result{RequeueAfter: requeue}, nil
}

// apply brings one target to the sources' content in: on first sight (or under a new install
// key) it only records the hash (no restart); when the content differs from the record, the
// reload goes through the pipeline (the gates, the rate step), then it patches the template's
// annotation and the record in one write, with what the gates write. wait is when to look
// again (a hold, a missing target), 0: on events.
func (r *Reconciler) apply(ctx context.Context, cfg *v1alpha1.ReloaderConfig, c *reloaderconfig.Compiled, t reloaderconfig.GenericTarget, in content) (wait time.Duration, err error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(t.GVK)
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: t.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
			r.Reporter.Event(cfg, nil, true, ReasonTargetMissing, "Reload", fmt.Sprintf("generic target %s %s: %v", t.GVK.Kind, t.Name, err))
			return genericRetry, nil
		}
		return 0, fmt.Errorf("get %s %s/%s: %w", t.GVK.Kind, cfg.Namespace, t.Name, err)
	}
	if tpl, ok, _ := unstructured.NestedMap(obj.Object, t.Path...); !ok || tpl == nil {
		r.Reporter.Event(cfg, obj, true, ReasonTemplatePathMissing, "Reload",
			fmt.Sprintf("generic target %s %s has no object at %s", t.GVK.Kind, t.Name, strings.Join(t.Path, ".")))
		return 0, nil
	}
	recKey := RecordAnnotation(cfg)
	recorded := obj.GetAnnotations()[recKey]
	_, legacy := obj.GetAnnotations()[LegacyRecordAnnotation]
	now := r.Now()
	changed := recorded != "" && recorded != in.hash && !rekeyed(recorded, in.hash)
	d := dueOf(cfg, c, t, obj, in, changed, now)
	k := d.Key

	// The gates, in the chain's order; asked when nothing is due too, so that they forget.
	res, err := r.Gates.Check(ctx, d)
	if err != nil {
		return 0, err
	}
	var hold reload.Hold
	if res.Held != nil {
		hold = res.Held.Hold
	}
	// The rate step: a reload that goes takes a slot; a slot no longer needed goes back.
	rolls := changed && hold.Reason == "" && !res.Notify
	if rolls {
		hold = rate.Hold(r.Pacer, rate.Wait(r.Pacer, k, cfg.Namespace, now, false), now)
		rolls = hold.Reason == ""
	} else {
		r.Pacer.Forget(k, now)
	}
	held := changed && hold.Reason != ""

	rep := r.Reporter
	rep.Invalid(ctx, cfg, res.Invalid...)
	rep.Say(ctx, k, cfg, obj, append(res.Notices, rate.Notice(d.Kind, t.Name, d.Changes, hold, now)...), changed)
	if held && !hold.Until.IsZero() {
		rep.Waiting(k, hold.Reason)
	} else {
		// A hold without end (an approval) waits for a person, not for time: not counted.
		rep.Waiting(k, "")
	}

	// The writer: what the gates keep on the target, always; the record, unless held; the
	// template's annotation and what the gates spend with it, when it rolls.
	meta := map[string]any{}
	for a, v := range res.Annotate {
		meta[a] = v
	}
	if !held {
		if recorded != in.hash {
			meta[recKey] = in.hash
		}
		if legacy {
			meta[LegacyRecordAnnotation] = nil
		}
	}
	if rolls {
		for a, v := range res.Spend {
			meta[a] = v
		}
	}
	if len(meta) > 0 {
		out := report.Outcome{Kind: d.Kind, Related: obj, Regarding: cfg}
		if rolls {
			out.Reloaded = in.changes
		}
		if out.Failed = r.write(ctx, obj, t, meta, rolls, in.hash); out.Failed != nil {
			rep.Done(ctx, obj, out)
			return 0, fmt.Errorf("patch %s %s/%s: %w", t.GVK.Kind, cfg.Namespace, t.Name, out.Failed)
		}
		out.Wrote = true
		rep.SayWritten(ctx, cfg, obj, res.Notices)
		if rolls {
			rep.Done(ctx, obj, out)
		}
	}
	if held && !hold.Until.IsZero() {
		wait = max(hold.Until.Sub(now), time.Second)
	}
	if res.Requeue > 0 && (wait == 0 || res.Requeue < wait) {
		wait = res.Requeue
	}
	return wait, nil
}

// write is the generic target's writer: one JSON merge patch of obj's annotations meta (a nil
// value removes one) and, when it rolls, of reloader.dev/last-reloaded: hash in the template
// at t's path, which rolls the pods the operator derives from it.
func (r *Reconciler) write(ctx context.Context, obj *unstructured.Unstructured, t reloaderconfig.GenericTarget, meta map[string]any, rolls bool, hash string) error {
	patch := map[string]any{"metadata": map[string]any{"annotations": meta}}
	if rolls {
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
		return err
	}
	ctx, cancel := writer.Carried(ctx) // a write begun is finished, and reported, on stopping too
	defer cancel()
	return r.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, body), client.FieldOwner(writer.FieldOwner))
}

// forget drops what the pipeline keeps of the targets named keys: the gates', the pacer's
// slot, the reporter's memory.
func (r *Reconciler) forget(keys []string) {
	now := r.Now()
	for _, k := range keys {
		r.Gates.Forget(k)
		r.Pacer.Forget(k, now)
		r.Reporter.Forget(k)
	}
}

// forgetConfig forgets the targets of a config that is gone, or names none any more.
func (r *Reconciler) forgetConfig(ns, name string) {
	r.forget(r.keys.keep(configKey(ns, name), nil))
}

// targetKeys are the keys of the targets each config named at its last reconcile, so that
// what the pipeline keeps of one is forgotten when its config stops naming it or goes.
// Bounded by the configs with generic targets, at most v1alpha1.MaxGenericTargets each.
type targetKeys struct {
	mu sync.Mutex
	m  map[string][]string
}

// keep sets config's keys to now and returns those it named before and not now.
func (t *targetKeys) keep(config string, now []string) (gone []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range t.m[config] {
		if !slices.Contains(now, k) {
			gone = append(gone, k)
		}
	}
	if len(now) == 0 {
		delete(t.m, config)
		return gone
	}
	if t.m == nil {
		t.m = map[string][]string{}
	}
	t.m[config] = slices.Clone(now)
	return gone
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

// confine refuses a target reloader must not write for a tenant: a kind --generic-target-kinds
// does not allow, or a cluster-scoped kind (a target is looked up in its config's namespace
// only, and a cluster-scoped object is no tenant's). problem says why, for the condition;
// missing says the API server serves no such kind (looked at again later).
func (r *Reconciler) confine(t reloaderconfig.GenericTarget) (problem, missing string, err error) {
	gk := t.GVK.GroupKind()
	if !r.Kinds.Allows(gk) {
		allowed := r.Kinds.String()
		if allowed == "" {
			allowed = "none"
		}
		return fmt.Sprintf("%s: kind %s is not allowed by --generic-target-kinds (allowed: %s)", t.Describe(), gk, allowed), "", nil
	}
	mapping, err := r.Client.RESTMapper().RESTMapping(gk, t.GVK.Version)
	if err != nil {
		if apimeta.IsNoMatchError(err) {
			return "", fmt.Sprintf("%s: the API server serves no such kind", t.GVK), nil
		}
		return "", "", fmt.Errorf("map %s: %w", t.GVK, err)
	}
	if mapping.Scope.Name() != apimeta.RESTScopeNameNamespace {
		return fmt.Sprintf("%s: kind %s is cluster-scoped; a generic target must be in its config's namespace", t.Describe(), gk), "", nil
	}
	return "", "", nil
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
// Warning Event when it turns False: refused names the targets of kinds not allowed (reason
// TargetRefused, first), denied the rules reloader's ServiceAccount lacks (AccessDenied).
func (r *Reconciler) setAccessCondition(ctx context.Context, cfg *v1alpha1.ReloaderConfig, refused, denied []string) error {
	cond := metav1.Condition{Type: v1alpha1.ConditionGenericTargets, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ReasonAccessGranted, Message: "reloader may get and patch every generic target", ObservedGeneration: cfg.Generation}
	var parts []string
	if len(refused) > 0 {
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonTargetRefused
		parts = append(parts, "refused, never written: "+strings.Join(refused, "; "))
	}
	if len(denied) > 0 {
		if cond.Status == metav1.ConditionTrue {
			cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonAccessDenied
		}
		parts = append(parts, "grant reloader's ServiceAccount "+strings.Join(denied, "; "))
	}
	if len(parts) > 0 {
		cond.Message = strings.Join(parts, "; ")
		if len(cond.Message) > 1024 {
			cond.Message = cond.Message[:1021] + "..."
		}
	}
	if was := apimeta.FindStatusCondition(cfg.Status.Conditions, cond.Type); was != nil &&
		was.Status == cond.Status && was.Reason == cond.Reason && was.Message == cond.Message && was.ObservedGeneration == cond.ObservedGeneration {
		return nil
	}
	if cond.Status == metav1.ConditionFalse {
		log.FromContext(ctx).Info("generic targets not written", "reason", cond.Reason, "message", cond.Message)
		r.Reporter.Event(cfg, nil, true, cond.Reason, "Reload", cond.Message)
	}
	base := cfg.DeepCopy()
	cond.LastTransitionTime = metav1.NewTime(r.Now()).Rfc3339Copy()
	apimeta.SetStatusCondition(&cfg.Status.Conditions, cond)
	// Optimistic lock: the list is replaced whole, and the status controller writes it too.
	patch := client.MergeFromWithOptimisticLock{}
	if err := r.Client.Status().Patch(ctx, cfg, client.MergeFromWithOptions(base, patch), client.FieldOwner(writer.FieldOwner)); err != nil {
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
	if err := r.Client.Status().Patch(ctx, cfg, patch, client.FieldOwner(writer.FieldOwner)); err != nil {
		return fmt.Errorf("patch status of ReloaderConfig %s/%s: %w", cfg.Namespace, cfg.Name, err)
	}
	return nil
}
