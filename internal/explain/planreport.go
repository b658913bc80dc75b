package explain

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/extapi"
	"github.com/reloader-operator/reloader/internal/lookup"
	"github.com/reloader-operator/reloader/internal/pace"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/workload"
)

// PlanAPIVersion versions the JSON form of a Plan: fields are only added within a version.
const PlanAPIVersion = "reloader.dev/plan/v1"

// Plan is what applying proposed ConfigMaps and Secrets would roll; `-o json` prints it as
// it is.
type Plan struct {
	APIVersion string `json:"apiVersion"`
	Namespace  string `json:"namespace"`
	// Now is when the plan was made: the times below count from it.
	Now time.Time `json:"now"`
	// Sources are the proposed objects, each compared with the live one.
	Sources []SourceChange `json:"sources"`
	// Workloads are those that reference or name a proposed source, or that a change of one
	// concerns: the ones that would roll first, then the others, each with why.
	Workloads []PlannedWorkload `json:"workloads"`
	Summary   PlanSummary       `json:"summary"`
	Notes     []string          `json:"notes,omitempty"`
}

// SourceChange is one proposed ConfigMap or Secret against the live one. Values are never
// part of it: only key names and hashes.
type SourceChange struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Change is one of the Change constants.
	Change string `json:"change"`
	// ChangedKeys are the keys added, removed or given another value.
	ChangedKeys []string `json:"changedKeys,omitempty"`
	// Hash is the proposed content's hash and LiveHash the live one's, as the controller
	// computes them; "unknown" for a Secret without reloader's hash key.
	Hash     string `json:"hash"`
	LiveHash string `json:"liveHash,omitempty"`
}

// The changes of a proposed source.
const (
	ChangeCreate = "create"
	ChangeUpdate = "update"
	ChangeNone   = "none"
)

// PlannedWorkload is what applying the proposed sources does to one workload. Rollout waves
// and approvals do not exist yet; when they do, the wave a workload rolls in and the approval
// it waits for are fields added here, and a step in Planner.pace.
type PlannedWorkload struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Rolls is true when its pods would be replaced because of the proposed change.
	Rolls bool `json:"rolls"`
	// Action is one of the PlanAction constants.
	Action string `json:"action"`
	// Reason is the decision's reason, per proposed source ("configmap/x: ...").
	Reason string `json:"reason"`
	// Sources are the proposed sources that concern it; Changed those whose change it
	// would roll (or, held, paused or skipped, record).
	Sources []string `json:"sources,omitempty"`
	Changed []string `json:"changed,omitempty"`
	// Pods is how many pods it runs (desired replicas; a DaemonSet's scheduled pods; none
	// for a CronJob between runs).
	Pods int32 `json:"pods"`
	// At is when its pods start rolling, for Rolls: after the coalescing window, then the
	// holds (min-reload-interval, reload-window, a pause period), then the rate limit.
	At *time.Time `json:"at,omitempty"`
	// HeldBy names what sets At beyond the coalescing window: min-interval, reload-window,
	// pause-period, rate-limit.
	HeldBy string `json:"heldBy,omitempty"`
	// Next is what the controller's next reconcile does once the change is applied, as
	// `reloader explain` says it.
	Next Next `json:"next"`
}

// The actions of a planned workload.
const (
	PlanRoll    = "roll"    // rolls, now or at At
	PlanHeld    = "held"    // rolls at At, held by a window, an interval or a pause period; without At, waits for approval
	PlanPaused  = "paused"  // the template is updated; the pods roll when it is resumed
	PlanNotify  = "notify"  // --webhook-url or mode notify: the change is reported, nothing rolls
	PlanSkip    = "skip"    // changed, but the controller skips it (a finished Job)
	PlanIgnored = "ignored" // the install leaves the workload alone
	PlanNone    = "none"    // nothing that concerns it changes
)

// PlanSummary counts what would roll.
type PlanSummary struct {
	Workloads  int   `json:"workloads"`
	Pods       int32 `json:"pods"`
	Namespaces int   `json:"namespaces"`
	// First and Last are when the first and last of them start rolling; Over is from now to
	// Last, as a Go duration.
	First *time.Time `json:"first,omitempty"`
	Last  *time.Time `json:"last,omitempty"`
	Over  string     `json:"over,omitempty"`
}

// sourceChange compares proposed obj with the live object of id.
func (p *Planner) sourceChange(id source.ID, obj client.Object) SourceChange {
	cur := p.current[id]
	sc := SourceChange{Kind: id.Kind.Title(), Name: id.Name, Change: ChangeCreate, Hash: unknown}
	st, _ := p.live.sourceType(id.Kind)
	if !p.live.unknownHash[id.Kind] {
		sc.Hash = st.Hash(obj)
	}
	if cur == nil {
		return sc
	}
	sc.Change, sc.LiveHash = ChangeNone, unknown
	if !p.live.unknownHash[id.Kind] {
		sc.LiveHash = st.Hash(cur)
	}
	sc.ChangedKeys = changedKeys(cur, obj)
	if len(sc.ChangedKeys) > 0 {
		sc.Change = ChangeUpdate
	}
	return sc
}

// immutable reports whether the live object of id is immutable: the API server refuses a
// change of its content.
func (p *Planner) immutable(id source.ID) bool {
	switch v := p.current[id].(type) {
	case *corev1.ConfigMap:
		return v.Immutable != nil && *v.Immutable
	case *corev1.Secret:
		return v.Immutable != nil && *v.Immutable
	}
	return false
}

// content is a source's keys and their values, the section of a ConfigMap's value with it
// (a value moved between data and binaryData changed, as the hashes count it).
func content(o client.Object) map[string][]byte {
	out := map[string][]byte{}
	switch v := o.(type) {
	case *corev1.ConfigMap:
		for k, s := range v.Data {
			out[k] = append([]byte{'d'}, s...)
		}
		for k, b := range v.BinaryData {
			out[k] = append([]byte{'b'}, b...)
		}
	case *corev1.Secret:
		for k, b := range v.Data {
			out[k] = append([]byte{'d'}, b...)
		}
	}
	return out
}

// changedKeys are the keys whose values differ between a and b (either may be nil).
func changedKeys(a, b client.Object) []string {
	ca, cb := map[string][]byte{}, map[string][]byte{}
	if a != nil {
		ca = content(a)
	}
	if b != nil {
		cb = content(b)
	}
	var out []string
	for k, v := range ca {
		if w, ok := cb[k]; !ok || !bytes.Equal(v, w) {
			out = append(out, k)
		}
	}
	for k := range cb {
		if _, ok := ca[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// differs reports whether the change from a to b touches the keys a workload uses: any key
// when it is not restricted to some.
func differs(a, b client.Object, keys []string, restricted bool) bool {
	if (a == nil) != (b == nil) {
		return true
	}
	for _, k := range changedKeys(a, b) {
		if !restricted || slices.Contains(keys, k) {
			return true
		}
	}
	return false
}

func (p *Planner) proposedOf(id source.ID) client.Object {
	for _, o := range p.proposed {
		if oid, _ := p.idOf(o); oid == id {
			return o
		}
	}
	return nil
}

func weighedOf(ex controller.Explanation, id source.ID) (lookup.Weighed, bool) {
	for _, w := range ex.Weighed {
		if w.ID == id {
			return w, true
		}
	}
	return lookup.Weighed{}, false
}

// workload plans one workload: the controller's decision on the cluster as it is, for its
// coalescing window, then on the cluster with the change, at the end of that window, as the
// controller will decide it. listed is false when it neither uses nor names a proposed
// source.
// heard are the sources of the proposed write as the controller's handlers will hear it.
func (p *Planner) workload(ctx context.Context, wk workload.Kind, obj client.Object, ids []source.ID, changed map[source.ID]bool, heard map[source.ID]client.Object) (PlannedWorkload, bool, error) {
	exL, err := p.live.reconciler(wk).Explain(ctx, obj, controller.Supposed{UnknownHash: p.live.unknownHash})
	if err != nil {
		return PlannedWorkload{}, false, err
	}
	decided := p.now.Add(exL.Window)
	rn := p.next.reconciler(wk)
	rn.Now = func() time.Time { return decided }
	supposed := controller.Supposed{UnknownHash: p.next.unknownHash, Heard: heard}
	exP, err := rn.Explain(ctx, obj, supposed)
	if err != nil {
		return PlannedWorkload{}, false, err
	}
	// Without the hash key a Secret's hash is unknown, and Explain takes it as unchanged:
	// its change is told from the content, restricted to the keys the workload uses.
	var assumed []source.ID
	for _, id := range ids {
		if d, ok := weighedOf(exP, id); ok && d.Concerns && p.next.unknownHash[id.Kind] {
			keys, restricted := exP.Keys[id]
			if differs(p.current[id], p.proposedOf(id), keys, restricted) {
				assumed = append(assumed, id)
			}
		}
	}
	if len(assumed) > 0 {
		supposed.Assumed = assumed
		if exP, err = rn.Explain(ctx, obj, supposed); err != nil {
			return PlannedWorkload{}, false, err
		}
	}
	pw := PlannedWorkload{Kind: wk.Name(), Name: obj.GetName(), Pods: pods(obj), Action: PlanNone}
	listed := false
	var why, rollWhy []string
	for _, id := range ids {
		d, ok := weighedOf(exP, id)
		if !ok || (!d.Concerns && !d.Referenced && !d.Named) {
			continue
		}
		listed = true
		switch {
		case !d.Concerns:
			why = append(why, id.String()+": "+string(d.Reason))
		case slices.Contains(exP.Changed, id) && pending(exL, exP, id):
			pw.Sources = append(pw.Sources, id.String())
			why = append(why, id.String()+": the proposed content is the live content, whose reload is still due: the controller rolls it whether or not this is applied")
		case slices.Contains(exP.Changed, id):
			pw.Sources = append(pw.Sources, id.String())
			pw.Changed = append(pw.Changed, id.String())
			verb := "changed"
			if p.current[id] == nil {
				verb = "created"
			}
			rollWhy = append(rollWhy, id.String()+": "+verb+"; "+string(d.Reason))
		default:
			pw.Sources = append(pw.Sources, id.String())
			why = append(why, id.String()+": "+p.unchangedWhy(id, exP, changed[id]))
		}
	}
	if !listed {
		return pw, false, nil
	}
	next := p.next.next(wk, obj, exP)
	pw.Next = next
	if len(pw.Changed) == 0 {
		pw.Reason = strings.Join(why, "; ")
		if next.Action == ActionIgnored {
			pw.Action, pw.Reason = PlanIgnored, next.Why
		}
		return pw, true, nil
	}
	pw.Reason = strings.Join(append(rollWhy, why...), "; ")
	at := decided
	switch next.Action {
	case ActionIgnored:
		pw.Action, pw.Reason = PlanIgnored, next.Why
	case ActionSkip:
		pw.Action, pw.Reason = PlanSkip, next.Why
	case ActionNotify:
		pw.Action, pw.Reason = PlanNotify, next.Why
	case ActionHeld:
		pw.Action, pw.HeldBy = PlanHeld, next.HeldBy
		pw.Reason += "; " + strings.TrimPrefix(next.Why, "changed since the last reload; ")
		// A hold without end waits for a person (mode approve): nothing rolls unless approved.
		if pw.Rolls = next.HeldUntil != nil; pw.Rolls {
			at = *next.HeldUntil
		}
	case ActionReload, ActionWait:
		pw.Action, pw.Rolls = PlanRoll, true
		if exP.Plan.Wait > 0 {
			at = at.Add(exP.Plan.Wait)
		}
		switch {
		case !exP.PausedUntil.IsZero():
			// The pause period holds the rollout of the new template until it ends.
			pw.Action, pw.HeldBy = PlanHeld, "pause-period"
			at = exP.PausedUntil
			pw.Reason += "; " + strings.TrimPrefix(next.Why, "changed since the last reload; ")
		case userPaused(wk, obj):
			pw.Action, pw.Rolls = PlanPaused, false
			pw.Reason += "; the " + wk.Name() + " is paused (spec.paused): its template is updated, and its pods roll only when it is resumed"
		}
	default:
		pw.Reason = next.Why
	}
	if pw.Rolls {
		t := at.UTC()
		pw.At = &t
	}
	return pw, true, nil
}

// heard are the proposed sources whose content changes, each with the object it is before
// the write, when the plan is made inside the controller: its sources' handlers hear the
// write, and note that object on the workloads without record it concerns, whose next
// reconcile then rolls them as it would a recorded one (baseline.Baselines). The object is
// the one the controller's cache holds, as the handlers note it (nil: absent). A plan from
// outside knows nothing of the controller's memory: nil.
func (p *Planner) heard(ctx context.Context, changed map[source.ID]bool) map[source.ID]client.Object {
	if p.live.baselines == nil {
		return nil
	}
	out := map[source.ID]client.Object{}
	for id, ch := range changed {
		if ch {
			out[id] = p.live.sourceObject(ctx, id)
		}
	}
	return out
}

// pending reports whether the change of id that the plan with the proposed content acts on is
// already there without it: the live content, not yet reloaded, hashes the same for the
// workload.
func pending(live, next controller.Explanation, id source.ID) bool {
	return slices.Contains(live.Changed, id) && live.Input.Sources[id].Hash == next.Input.Sources[id].Hash
}

// unchangedWhy says why a source that concerns a workload changes nothing for it.
func (p *Planner) unchangedWhy(id source.ID, ex controller.Explanation, changed bool) string {
	keys, restricted := ex.Keys[id]
	switch {
	case !changed:
		return "the proposed content is the live content"
	case restricted:
		return "only keys it does not use change (it uses " + strings.Join(keys, ", ") + ")"
	case p.current[id] == nil && !p.live.conf.ReloadOnCreate:
		return "created, and --reload-on-create is off: the creation is recorded, nothing rolls"
	case !ex.HasRecord:
		return "seen by reloader for the first time: it records the hashes and rolls nothing"
	case !folded(ex.Record) && !inRecord(ex.Record, id):
		return "new to the workload's record: its hash is recorded, nothing rolls"
	}
	return "its hash is the one last applied to the workload"
}

// userPaused reports whether the workload is paused by someone else than reloader.
func userPaused(wk workload.Kind, obj client.Object) bool {
	pz, ok := wk.(workload.Pausable)
	return ok && pz.Paused(obj)
}

// pods is how many pods the workload runs.
func pods(obj client.Object) int32 {
	orOne := func(p *int32) int32 {
		if p == nil {
			return 1
		}
		return *p
	}
	switch w := obj.(type) {
	case *appsv1.Deployment:
		return orOne(w.Spec.Replicas)
	case *appsv1.StatefulSet:
		return orOne(w.Spec.Replicas)
	case *appsv1.DaemonSet:
		return w.Status.DesiredNumberScheduled
	case *batchv1.Job:
		return orOne(w.Spec.Parallelism)
	case *extapi.Rollout:
		return orOne(w.Spec.Replicas)
	case *extapi.DeploymentConfig:
		return w.Spec.Replicas
	}
	return 0 // a CronJob runs pods only when scheduled
}

// pace spreads the rolls over time as the controller's rate limit would (--reload-rate,
// --reload-burst): in the order they become due, each takes the next token of the
// controller's own Pacer. The queue order among reloads due together is the controller's
// work queue's, which can't be told ahead: the times are estimates, the span is not.
//
// Rollout waves and approvals, when they exist, come in here: after the holds, before the
// rate limit.
func (p *Planner) pace(ws []PlannedWorkload) {
	var due []int
	for i, w := range ws {
		if w.Rolls {
			due = append(due, i)
		}
	}
	slices.SortStableFunc(due, func(a, b int) int { return ws[a].At.Compare(*ws[b].At) })
	pacer := pace.New(p.live.conf.ReloadRate, p.live.conf.ReloadBurst, 0)
	for _, i := range due {
		w := &ws[i]
		if wait := pacer.Reload(w.Kind+"/"+p.namespace+"/"+w.Name, p.namespace, *w.At); wait > 0 {
			t := w.At.Add(wait)
			w.At = &t
			if w.HeldBy == "" {
				w.HeldBy = "rate-limit"
			}
		}
	}
}

func (p *Planner) summary(ws []PlannedWorkload) PlanSummary {
	var s PlanSummary
	namespaces := map[string]bool{}
	for _, w := range ws {
		if !w.Rolls {
			continue
		}
		s.Workloads++
		s.Pods += w.Pods
		namespaces[p.namespace] = true
		if s.First == nil || w.At.Before(*s.First) {
			s.First = w.At
		}
		if s.Last == nil || w.At.After(*s.Last) {
			s.Last = w.At
		}
	}
	s.Namespaces = len(namespaces)
	if s.Last != nil {
		s.Over = max(s.Last.Sub(p.now), 0).Round(time.Millisecond).String()
	}
	return s
}

// Rolls reports whether the plan rolls any workload.
func (pl *Plan) Rolls() bool { return pl.Summary.Workloads > 0 }

func inRecord(r reload.Record, id source.ID) bool {
	_, ok := r[id.String()]
	return ok
}
