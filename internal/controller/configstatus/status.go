// Package configstatus writes the status of ReloaderConfigs: what their rules resolve to
// (through the controllers' shared Lookup), what is wrong with them, and each target's last
// reload and rollout (ReloadLog, fed by the workload reconcilers and the rollout follower).
package configstatus

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/controller/lazywatch"
	"github.com/reloader-operator/reloader/internal/lookup"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
	"github.com/reloader-operator/reloader/internal/shard"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/workload"
	"github.com/reloader-operator/reloader/internal/writer"
)

// Reconciler writes the status of ReloaderConfigs: what their rules resolve to
// now (targets, sources and their hashes), what is wrong with them, and each target's last
// reload by them. It reads only the cache, and patches the status only when it changed.
type Reconciler struct {
	// Client reads the configs and writes their status.
	Client client.Client
	// Lookup reads the targets and the sources (its Sources are the source types watched; a
	// source of another kind is reported) and compiles the configs (Lookup.Configs).
	Lookup lookup.Lookup
	// Kinds are the workload kinds reloader reconciles; a target of another kind is reported.
	Kinds    []workload.Kind
	Keys     reload.Keys
	Reloads  *ReloadLog
	Recorder recorder.EventRecorder
	// Shard is WorkloadReconciler.Shard.
	Shard func(namespace string) (own, ready bool)
	// Held says what holds a target's due reload (targets[].held); nil: never shown.
	Held HeldFunc
	Now  func() time.Time

	mu    sync.Mutex
	queue workqueueOfRequests
	// lazy are the source and workload watches, started by the first reconcile.
	lazy lazywatch.Watches
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if err := r.lazy.Start(); err != nil {
		return reconcile.Result{}, fmt.Errorf("watch the sources and workloads of ReloaderConfigs: %w", err)
	}
	// As the workload reconcilers: another replica's, or its targets not listed yet.
	if skip, wait := shard.Gate(r.Shard, req.Namespace); skip || wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	cfg := &v1alpha1.ReloaderConfig{}
	if err := r.Client.Get(ctx, req.NamespacedName, cfg); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !cfg.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	c := r.Lookup.Configs.Get(cfg)
	res, err := r.resolve(ctx, cfg.Namespace, c)
	if err != nil {
		return reconcile.Result{}, err
	}
	peers, left, err := r.Lookup.EveryNamespaceConfig(ctx, cfg.Namespace)
	if err != nil {
		return reconcile.Result{}, err
	}
	if slices.ContainsFunc(left, func(p *reloaderconfig.Compiled) bool { return p.UID == c.UID }) {
		// First: it says why none of the rest applies.
		res.issues = slices.Insert(res.issues, 0, reloaderconfig.Issue{Reason: v1alpha1.ReasonLimitExceeded, Message: reloaderconfig.LeftOut()})
	}
	r.conflicts(c, peers, res)
	held, again := r.holds(ctx, res)
	// Holds begin and end when windows close and slots come, with no event: looked at again
	// then (not more than once a second).
	var result reconcile.Result
	if again > 0 {
		result.RequeueAfter = max(again, time.Second)
	}
	status := r.status(cfg, c, res, held)
	if equality.Semantic.DeepEqual(cfg.Status, status) {
		return result, nil
	}
	r.tell(ctx, cfg, status)
	patch, err := statusPatch(cfg, status)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := r.Client.Status().Patch(ctx, cfg, patch, client.FieldOwner(writer.FieldOwner)); err != nil {
		return reconcile.Result{}, fmt.Errorf("patch status of ReloaderConfig %s: %w", req, err)
	}
	return result, nil
}

// statusPatch is the merge patch from cfg's status to status. The counts are always in it: a
// count of 0 equals the zero value the old status decodes to when it was never written, so a
// plain diff would leave it out and kubectl's column blank.
func statusPatch(cfg *v1alpha1.ReloaderConfig, status v1alpha1.ReloaderConfigStatus) (client.Patch, error) {
	base := client.MergeFrom(cfg.DeepCopy())
	cfg.Status = status
	data, err := base.Data(cfg)
	if err != nil {
		return nil, fmt.Errorf("status patch: %w", err)
	}
	var p map[string]any
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("status patch: %w", err)
	}
	st, _ := p["status"].(map[string]any)
	if st == nil {
		st = map[string]any{}
	}
	st["targetCount"], st["sourceCount"], st["heldCount"] = status.TargetCount, status.SourceCount, status.HeldCount
	p["status"] = st
	if _, ok := st["conditions"]; ok {
		// A merge patch replaces the list whole, and the generic targets' controller writes
		// a condition of it too: only over the version read (a conflict retries).
		p["metadata"] = map[string]any{"resourceVersion": cfg.ResourceVersion}
	}
	if data, err = json.Marshal(p); err != nil {
		return nil, fmt.Errorf("status patch: %w", err)
	}
	return client.RawPatch(types.MergePatchType, data), nil
}

// status builds the status of cfg from what its rules resolve to; the last reloads of the
// status before are kept when reloader holds none newer (it forgets them on restart).
func (r *Reconciler) status(cfg *v1alpha1.ReloaderConfig, c *reloaderconfig.Compiled, res *resolution, held map[workloadKey]*v1alpha1.Held) v1alpha1.ReloaderConfigStatus {
	st := v1alpha1.ReloaderConfigStatus{ObservedGeneration: cfg.Generation,
		TargetCount: int32(len(res.targets)), SourceCount: int32(len(res.sources))}
	before := map[workloadKey]*v1alpha1.Reload{}
	for _, t := range cfg.Status.Targets {
		before[workloadKey{t.Kind, client.ObjectKey{Namespace: cfg.Namespace, Name: t.Name}}] = t.LastReload
	}
	for _, key := range sortedTargets(res.targets) {
		t := res.targets[key]
		last := newer(before[key], r.lastReload(key, res, cfg.CreationTimestamp.Time))
		if last != nil {
			if st.LastReloadTime == nil || st.LastReloadTime.Before(&last.Time) {
				st.LastReloadTime = last.Time.DeepCopy()
			}
			if last.Rollout == rolloutStalledStatus {
				res.issue(v1alpha1.ReasonRolloutStalled, "the rollout of %s %s after its reload stalled: %s", t.kind.Name(), t.obj.GetName(), last.RolloutReason)
			}
		}
		if len(st.Targets) < v1alpha1.MaxStatusEntries {
			st.Targets = append(st.Targets, v1alpha1.TargetStatus{Kind: t.kind.Name(), Name: t.obj.GetName(),
				LastReload: last, PausedUntil: r.pausedUntil(t, c), Held: held[key]})
			if held[key] != nil {
				st.HeldCount++
			}
		}
	}
	ids := make([]source.ID, 0, len(res.sources))
	for id := range res.sources {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b source.ID) int { return strings.Compare(a.String(), b.String()) })
	for _, id := range ids[:min(len(ids), v1alpha1.MaxStatusEntries)] {
		s := res.sources[id]
		st.Sources = append(st.Sources, v1alpha1.SourceStatus{Kind: id.Kind.Title(), Name: id.Name, Hash: s.hash, Keys: s.keys})
	}
	st.Conditions = reloaderconfig.Conditions(cfg.Status.Conditions, res.issues, cfg.Generation, metav1.NewTime(r.Now()).Rfc3339Copy())
	return st
}

// rolloutStalledStatus is how status.targets[].lastReload.rollout names a stalled rollout
// (RolloutStalled, capitalised as the API's values are).
const rolloutStalledStatus = "Stalled"

// lastReload is the latest reload of the workload that reloader holds, when a source the
// config chooses caused it, since the config was created (before, its rules had no part in
// it).
func (r *Reconciler) lastReload(key workloadKey, res *resolution, created time.Time) *v1alpha1.Reload {
	e, ok := r.Reloads.Latest(key.kind, key.NamespacedName, func(id source.ID) bool { return res.chosen[id] })
	if !ok || e.At.Before(created.Truncate(time.Second)) {
		return nil
	}
	return &v1alpha1.Reload{Time: metav1.NewTime(e.At).Rfc3339Copy(), Source: e.Source.String(), Hash: e.Hash,
		Rollout: e.Rollout, RolloutReason: e.RolloutReason}
}

// newer returns the later of two reloads; on a tie the one reloader holds, which may know
// the rollout's outcome.
func newer(stored, held *v1alpha1.Reload) *v1alpha1.Reload {
	switch {
	case held == nil:
		return stored
	case stored == nil || !held.Time.Before(&stored.Time):
		return held
	}
	return stored
}

// tell reports a config that became degraded, or changed why, in an Event and the log.
func (r *Reconciler) tell(ctx context.Context, cfg *v1alpha1.ReloaderConfig, status v1alpha1.ReloaderConfigStatus) {
	now := apimeta.FindStatusCondition(status.Conditions, v1alpha1.ConditionDegraded)
	if now == nil || now.Status != metav1.ConditionTrue {
		return
	}
	if was := apimeta.FindStatusCondition(cfg.Status.Conditions, v1alpha1.ConditionDegraded); was != nil &&
		was.Status == now.Status && was.Message == now.Message {
		return
	}
	log.FromContext(ctx).Info("ReloaderConfig degraded", "reason", now.Reason, "message", now.Message)
	r.Recorder.Eventf(cfg, nil, corev1.EventTypeWarning, now.Reason, "Resolve", "%s", now.Message)
}

func (r *Reconciler) kind(name string) workload.Kind {
	for _, k := range r.Kinds {
		if strings.EqualFold(k.Name(), name) {
			return k
		}
	}
	return nil
}
