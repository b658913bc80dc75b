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
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
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
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/approval"
	shared "github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/flap"
	"github.com/reloader-operator/reloader/internal/lookup"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/pace"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
	"github.com/reloader-operator/reloader/internal/shard"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/termsafe"
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

// approvalPoll is how often a reload waiting for approval is looked at again: the approval is
// written on the target, whose kind reloader does not watch.
const approvalPoll = 30 * time.Second

// Reconciler patches the pod templates of generic targets (spec.genericTargets of
// ReloaderConfigs): objects of the kinds --generic-target-kinds allows, in the config's own
// namespace, read and written live with unstructured clients, as far as reloader's
// ServiceAccount may (it asks first, and says what is missing). A due reload passes the
// workloads' guardrails first (gate.go).
type Reconciler struct {
	// Client reads the configs (cached) and writes targets, statuses and access reviews.
	Client client.Client
	// APIReader reads sources and targets live: a target's kind has no informer.
	APIReader client.Reader
	Configs   *reloaderconfig.Cache
	Recorder  recorder.EventRecorder
	Sources   []sourcecache.SourceType
	Now       func() time.Time
	// Shard is WorkloadReconciler.Shard: under --shards, only the namespace's owner acts.
	Shard func(namespace string) (own, ready bool)
	// Kinds is --generic-target-kinds; the zero value refuses every target.
	Kinds reloaderconfig.KindAllowlist
	// Namespaces is --namespace-selector; nil selects all.
	Namespaces labels.Selector
	// Mode is --mode; Flaps, Pacer and MinReloadInterval are the workload reconcilers' (nil:
	// no breaker, no pacing); Caches keeps the windows' zones.
	Mode              approval.Mode
	Flaps             *flap.Table
	Pacer             *pace.Pacer
	MinReloadInterval time.Duration
	Caches            *reload.Caches
	// Workers is how many configs reconcile at once.
	Workers int
	// Metrics hears of each reconcile as it ends (Metrics.Hook, as HookKind).
	Metrics *metrics.Metrics

	notes notes
}

// Reconcile brings each generic target of one config to the current hash of its sources.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	defer func(started time.Time) {
		r.Metrics.Ended(metrics.Reconcile{Kind: HookKind, Namespace: req.Namespace, Name: req.Name, Outcome: metrics.OutcomeOf(err), Started: started})
	}(time.Now())
	// As the workload reconcilers: another replica's, or its targets not listed yet.
	if skip, wait := shard.Gate(r.Shard, req.Namespace); skip || wait > 0 {
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
		return reconcile.Result{}, r.dropAccessCondition(ctx, cfg)
	}
	// As for workloads: a namespace not selected is left as it is, records included.
	if selected, err := (lookup.Lookup{Client: r.Client, Namespaces: r.Namespaces}).NamespaceSelected(ctx, cfg.Namespace); err != nil || !selected {
		return reconcile.Result{}, err
	}
	in, err := r.sourcesHash(ctx, cfg)
	if err != nil {
		return reconcile.Result{}, err
	}
	var denied, refused []string
	var requeue time.Duration
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
				r.Recorder.Eventf(cfg, nil, corev1.EventTypeWarning, ReasonTargetMissing, "Reload",
					"generic target %s: %s", t.Describe(), problem)
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
		wait, err := r.apply(ctx, cfg, c, t, in)
		if err != nil {
			return reconcile.Result{}, err
		}
		soonest(wait)
	}
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
// reload passes the guardrails (gate.go), then it patches the template's annotation and the
// record in one write. wait is when to look again (a hold, a missing target), 0: on events.
func (r *Reconciler) apply(ctx context.Context, cfg *v1alpha1.ReloaderConfig, c *reloaderconfig.Compiled, t reloaderconfig.GenericTarget, in content) (wait time.Duration, err error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(t.GVK)
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: t.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
			r.Recorder.Eventf(cfg, nil, corev1.EventTypeWarning, ReasonTargetMissing, "Reload",
				"generic target %s %s: %v", t.GVK.Kind, t.Name, err)
			return genericRetry, nil
		}
		return 0, fmt.Errorf("get %s %s/%s: %w", t.GVK.Kind, cfg.Namespace, t.Name, err)
	}
	if tpl, ok, _ := unstructured.NestedMap(obj.Object, t.Path...); !ok || tpl == nil {
		r.Recorder.Eventf(cfg, obj, corev1.EventTypeWarning, ReasonTemplatePathMissing, "Reload",
			"generic target %s %s has no object at %s", t.GVK.Kind, t.Name, strings.Join(t.Path, "."))
		return 0, nil
	}
	k := targetKey(cfg, t)
	ann := obj.GetAnnotations()
	recKey := RecordAnnotation(cfg)
	recorded := ann[recKey]
	_, legacy := ann[LegacyRecordAnnotation]
	now := r.Now()
	if recorded == in.hash && !legacy {
		// Nothing due (any more): a rate slot reserved for it goes back.
		if r.settled(k) {
			r.Pacer.Forget(k, now)
		}
		return 0, nil
	}
	meta := map[string]any{recKey: in.hash}
	if legacy {
		meta[LegacyRecordAnnotation] = nil
	}
	due := recorded != "" && recorded != in.hash && !rekeyed(recorded, in.hash)
	var g gateOut
	if due {
		g = r.gates(ctx, cfg, c, obj, t, in, now)
		if g.Hold.Reason == "" && !g.Notify {
			if w := r.Pacer.Reload(k, cfg.Namespace, now); w > 0 {
				g.Hold = reload.Hold{Reason: reload.HoldRateLimit, Until: now.Add(w), Why: r.Pacer.String()}
			}
		} else {
			r.Pacer.Forget(k, now) // a slot reserved goes back; it takes one when due again
		}
		if g.Hold.Reason != "" {
			return r.held(ctx, cfg, obj, t, k, g.Hold, now), nil
		}
	}
	patch := map[string]any{"metadata": map[string]any{"annotations": meta}}
	rolls := due && !g.Notify
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
		at["metadata"] = map[string]any{"annotations": map[string]any{GenericTemplateAnnotation: in.hash}}
		if g.MinInterval > 0 {
			meta[reload.LastReloadAnnotation] = now.UTC().Format(time.RFC3339)
		}
		if g.Approved {
			meta[approval.ApprovedAnnotation] = nil // spent by this reload
		}
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return 0, err
	}
	if err := r.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, body), client.FieldOwner(shared.FieldOwner)); err != nil {
		return 0, fmt.Errorf("patch %s %s/%s: %w", t.GVK.Kind, cfg.Namespace, t.Name, err)
	}
	r.settled(k)
	switch {
	case rolls:
		log.FromContext(ctx).Info("reloaded generic target", "kind", t.GVK.Kind, "name", t.Name, "hash", in.hash)
		r.Recorder.Eventf(cfg, obj, corev1.EventTypeNormal, shared.ReasonReloaded, "Reload",
			"patched %s %s at %s.metadata.annotations", t.GVK.Kind, t.Name, strings.Join(t.Path, "."))
	case due:
		log.FromContext(ctx).Info("would reload generic target (mode notify)", "kind", t.GVK.Kind, "name", t.Name, "hash", in.hash)
		r.Recorder.Eventf(cfg, obj, corev1.EventTypeNormal, shared.ReasonReloadNotified, "Notify",
			"Would reload %s %s after a change of its sources; mode notify: its template is not written, the new hash is recorded", t.GVK.Kind, t.Name)
	}
	return 0, nil
}

// gates reads what planGates decides from, and reports the annotations it could not read.
func (r *Reconciler) gates(ctx context.Context, cfg *v1alpha1.ReloaderConfig, c *reloaderconfig.Compiled, obj *unstructured.Unstructured, t reloaderconfig.GenericTarget, in content, now time.Time) gateOut {
	sourceAnn := func(ch reload.Change) map[string]string { return in.annotations[ch.ID] }
	q, bad := quarantine(r.Flaps, cfg.Namespace, in.changes, sourceAnn, now)
	g := planGates(gateIn{Now: now, Target: obj.GetAnnotations(), Due: in.changes, SourceAnn: sourceAnn,
		DefaultMode: defaultMode(c, r.Mode), Quarantine: q,
		Hold:          holdState(obj.GetAnnotations(), c.Overrides, r.MinReloadInterval, r.Caches),
		ApproveTarget: approveTarget(t, cfg.Namespace)})
	if bad = append(bad, g.Invalid...); len(bad) > 0 {
		msg := errors.Join(bad...).Error()
		log.FromContext(ctx).Info("invalid reload annotation; the valid rules still apply", "error", msg)
		r.Recorder.Eventf(cfg, obj, corev1.EventTypeWarning, shared.ReasonInvalidAnnotation, "Validate", "%s", termsafe.ClipNote(msg))
	}
	return g
}

// approveTarget is how kubectl names the target: kind.group/name -n namespace.
func approveTarget(t reloaderconfig.GenericTarget, ns string) string {
	res := strings.ToLower(t.GVK.Kind)
	if t.GVK.Group != "" {
		res += "." + t.GVK.Group
	}
	return res + "/" + t.Name + " -n " + ns
}

// held announces a held reload once per hold (an Event on the config, a log line) and
// returns when to look again.
func (r *Reconciler) held(ctx context.Context, cfg *v1alpha1.ReloaderConfig, obj client.Object, t reloaderconfig.GenericTarget, k string, h reload.Hold, now time.Time) time.Duration {
	wait := h.Until.Sub(now)
	if h.Reason == approval.HoldReason {
		wait = approvalPoll
	}
	note := fmt.Sprintf("Reload of %s %s held by %s", t.GVK.Kind, t.Name, h.Why)
	if !h.Until.IsZero() {
		note += "; reloads at " + h.Until.UTC().Format(time.RFC3339)
	}
	if r.notes.first(k, h.Reason+"\x00"+note) {
		reason := shared.ReasonReloadHeld
		switch h.Reason {
		case approval.HoldReason:
			reason = shared.ReasonApprovalPending
		case flap.HoldReason:
			reason = shared.ReasonSourceQuarantined
		}
		log.FromContext(ctx).Info("reload of generic target held", "kind", t.GVK.Kind, "name", t.Name, "reason", h.Reason, "why", h.Why)
		r.Recorder.Eventf(cfg, obj, corev1.EventTypeNormal, reason, "Hold", "%s", termsafe.ClipNote(note))
	}
	return max(wait, time.Second)
}

// settled forgets the hold announced for a target that is at its content; it reports whether
// one was.
func (r *Reconciler) settled(k string) bool {
	return r.notes.forget(k)
}

// forgetConfig drops the holds, and their rate slots, of a config that is gone.
func (r *Reconciler) forgetConfig(ns, name string) {
	now := r.Now()
	for _, k := range r.notes.forgetPrefix(configKey(ns, name)) {
		r.Pacer.Forget(k, now)
	}
}

// configKey starts the keys of a config's targets.
func configKey(ns, name string) string { return "generic/" + ns + "/" + name + "/" }

// targetKey names a target of a config, for the pacer and the notes.
func targetKey(cfg *v1alpha1.ReloaderConfig, t reloaderconfig.GenericTarget) string {
	return configKey(cfg.Namespace, cfg.Name) + t.GVK.GroupKind().String() + "/" + t.Name
}

// notes remembers, per target, the hold last announced, so that each is announced once.
// Bounded by the generic targets of the configs (at most MaxGenericTargets each).
type notes struct {
	mu sync.Mutex
	m  map[string]string
}

func (n *notes) first(k, note string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil {
		n.m = map[string]string{}
	}
	if n.m[k] == note {
		return false
	}
	n.m[k] = note
	return true
}

func (n *notes) forget(k string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, had := n.m[k]
	delete(n.m, k)
	return had
}

func (n *notes) forgetPrefix(prefix string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for k := range n.m {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
			delete(n.m, k)
		}
	}
	return out
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
		r.Recorder.Eventf(cfg, nil, corev1.EventTypeWarning, cond.Reason, "Reload", "%s", cond.Message)
	}
	base := cfg.DeepCopy()
	cond.LastTransitionTime = metav1.NewTime(r.Now()).Rfc3339Copy()
	apimeta.SetStatusCondition(&cfg.Status.Conditions, cond)
	// Optimistic lock: the list is replaced whole, and the status controller writes it too.
	patch := client.MergeFromWithOptimisticLock{}
	if err := r.Client.Status().Patch(ctx, cfg, client.MergeFromWithOptions(base, patch), client.FieldOwner(shared.FieldOwner)); err != nil {
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
