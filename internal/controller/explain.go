package controller

import (
	"context"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/baseline"
	"github.com/reloader-operator/reloader/internal/coalesce"
	"github.com/reloader-operator/reloader/internal/gate"
	"github.com/reloader-operator/reloader/internal/lookup"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/whatchanged"
)

// Explanation is what the next reconcile of a workload would decide, made by the reconcile's
// own steps (observe, input, and the pipeline, dry) on what the reconciler's client reads now.
type Explanation struct {
	// NotSelected is true when --namespace-selector leaves the workload's namespace out.
	NotSelected bool
	// Weighed are the sources the decision looked at, in the order it did.
	Weighed []lookup.Weighed
	// Record is the record on the workload; HasRecord is false when there is none, or it is
	// unreadable.
	Record    reload.Record
	HasRecord bool
	// Input is what the plan was made from; Input.Sources holds the current hashes.
	Input reload.Input
	// Changed are the sources the plan acts on (reloads, or skips), were there no wait.
	Changed []source.ID
	// Decision is what the reconcile would decide, by the controller's own pipeline run dry
	// (decide): its Plan; its Hold, when the plan reloads, the first gate's hold, else the
	// rate limiter's (Hold.Reason is empty when the reload goes now; a rate-limit slot is
	// known only inside the controller); its Pause, the pause-period step of a Pausable kind.
	reload.Decision
	// Gated is what the gates answered, in their order (Gated.Held names the gate that holds).
	Gated gate.Result
	// Window is the coalescing window of the workload: the flag's, or a ReloaderConfig's.
	Window time.Duration
	// PausedUntil is when the pause ends, zero when none holds.
	PausedUntil time.Time
	// Invalid are the workload's annotations that could not be parsed.
	Invalid []error
	// Keys are, for the sources restricted to some keys (keys annotations, used-keys-only),
	// the keys their hash covers.
	Keys map[source.ID][]string
	// Configs name the ReloaderConfigs whose rules or settings apply to the workload;
	// Conflicts say which settings two of them disagree on.
	Configs   []string
	Conflicts []string
	// Writers are, for the sources that exist, who wrote each last (its managedFields).
	Writers map[source.ID]whatchanged.Writer
	// Restart is how the pods restart when not by a template change (evict), and Eviction
	// how far an evict restart under way has come (evict.Restarter.Explain).
	Restart, Eviction string
}

// Supposed is what an explanation takes as given beyond what the reconciler reads: what
// `reloader plan` and the plan webhook know of a change not made yet.
type Supposed struct {
	// UnknownHash are the source kinds whose hashes can't be computed (Secrets, when the hash
	// key can't be read): taken as unchanged since their record, but for those in Assumed,
	// taken as changed (the plan compared their proposed content with the live one itself).
	UnknownHash map[source.Kind]bool
	Assumed     []source.ID
	// Heard are source changes taken as heard by the baselines' handlers before the
	// reconcile, each with its source's object before it (nil: it did not exist): on a
	// workload without record, each that concerns it is noted unless a change of that source
	// is noted already, as the handlers note a change they hear (baseline.Baselines). A plan
	// made inside the controller supposes so of the write it plans.
	Heard map[source.ID]client.Object
}

// Explain plans the next reconcile of obj without writing anything, with what s supposes.
// The coalescing window is the controller's memory, not the cluster's: the wait is estimated
// from the times the changed sources were last written. The baselines, when the reconciler
// has the controller's, are read as the reconcile reads them, and nothing is forgotten.
func (r *WorkloadReconciler) Explain(ctx context.Context, obj client.Object, s Supposed) (Explanation, error) {
	now := r.Now()
	var e Explanation
	selected, err := r.observer().lookup().NamespaceSelected(ctx, obj.GetNamespace())
	if err != nil {
		return e, err
	}
	e.NotSelected = !selected
	w, err := r.observer().observe(ctx, obj, &e.Weighed)
	if err != nil {
		return e, err
	}
	e.Invalid, e.Writers, e.Keys = w.invalid, r.observer().writers(w), restrictedKeys(w)
	if err := r.explainConfigs(ctx, obj, &e); err != nil {
		return e, err
	}
	e.Record, e.HasRecord = r.observer().record(ctx, obj)
	k := r.windowKey(client.ObjectKeyFromObject(obj))
	in := unknownAsRecorded(r.observer().input(ctx, obj, w, k), s.UnknownHash, s.Assumed)
	in.Baseline = noteHeard(in, baseline.HashAs(r.Sources, w.sources), w.sources, s.Heard)
	plan := reload.MakePlan(in)
	for _, ch := range slices.Concat(plan.Changes, plan.Skipped) {
		e.Changed = append(e.Changed, ch.ID)
	}
	e.Window = r.Window.Quiet
	if w.settings.window != nil {
		e.Window = *w.settings.window
	}
	if len(e.Changed) > 0 {
		in.Wait = settling(k, e.Window, w.sources, e.Changed, now)
	}
	d, res, err := r.decide(ctx, obj, w, r.observer().facts(obj, w, in, now), k, true, nil)
	if err != nil {
		return e, err
	}
	e.Input, e.Decision, e.Gated = in, d, res
	restart := r.writeParts().evict.Explain(ctx, obj, e.Plan.Reloads())
	e.Restart, e.Eviction = restart.Restart, restart.Eviction
	if restart.Invalid != nil {
		e.Invalid = append(e.Invalid, restart.Invalid)
	}
	e.Invalid = append(e.Invalid, res.Invalid...)
	if e.Pause.Requeue > 0 {
		e.PausedUntil = now.Add(e.Pause.Requeue)
	}
	return e, nil
}

// restrictedKeys are, for the sources of w restricted to some keys, the keys their hash covers.
func restrictedKeys(w seen) map[source.ID][]string {
	var out map[source.ID][]string
	for id, o := range w.sources {
		if o.Restricted {
			if out == nil {
				out = map[source.ID][]string{}
			}
			out[id] = o.Keys
		}
	}
	return out
}

// unknownAsRecorded takes the sources of a kind in unknownHash as unchanged since their
// record (their hash can't be computed), or, for those in assumed, as changed.
func unknownAsRecorded(in reload.Input, unknownHash map[source.Kind]bool, assumed []source.ID) reload.Input {
	for id, o := range in.Sources {
		if old, ok := in.Record[id.String()]; ok && unknownHash[id.Kind] && o.Hash != reload.Absent {
			o.Hash = old
			if slices.Contains(assumed, id) {
				o.Hash = old + AssumedChange
			}
			in.Sources[id] = o
		}
	}
	return in
}

// noteHeard is the baseline of in with the changes heard noted, for a workload without
// record: each of a source that concerns it (in sources) and that no note precedes, hashed
// as the workload observes the source (hashOf).
func noteHeard(in reload.Input, hashOf func(source.ID, client.Object) string, sources map[source.ID]sourcecache.Observed, heard map[source.ID]client.Object) reload.Record {
	if in.HasRecord || len(heard) == 0 {
		return in.Baseline
	}
	out := in.Baseline
	for id, old := range heard {
		if _, concerns := sources[id]; !concerns {
			continue
		}
		if _, noted := out[id.String()]; noted {
			continue
		}
		if out == nil {
			out = reload.Record{}
		}
		out[id.String()] = hashOf(id, old)
	}
	return out
}

// explainConfigs names the ReloaderConfigs that apply to obj, as observe merges them.
func (r *WorkloadReconciler) explainConfigs(ctx context.Context, obj client.Object, e *Explanation) error {
	m, err := r.observer().lookup().ConfigsFor(ctx, r.Kind, obj)
	if err != nil {
		return err
	}
	for _, rule := range m.Rules {
		e.Configs = append(e.Configs, rule.Config)
	}
	if m.Overrides.Config != "" {
		e.Configs = append(e.Configs, m.Overrides.Config)
	}
	slices.Sort(e.Configs)
	e.Configs = slices.Compact(e.Configs)
	for _, c := range m.Conflicts {
		e.Conflicts = append(e.Conflicts, c.String())
	}
	return nil
}

// settling is how long the coalescing window still holds back changes that the controller
// heard when the changed sources were last written (by their managed fields' times).
func settling(k string, quiet time.Duration, sources map[source.ID]sourcecache.Observed, changed []source.ID, now time.Time) time.Duration {
	var times []time.Time
	for _, id := range changed {
		if o := sources[id].Object(); o != nil {
			times = append(times, lastWrite(o))
		}
	}
	slices.SortFunc(times, time.Time.Compare)
	w := coalesce.New(quiet)
	for _, t := range times {
		w.Now = func() time.Time { return t }
		w.Touch(k)
	}
	w.Now = func() time.Time { return now }
	return w.Wait(k)
}

// lastWrite is when an object was last written, as far as its metadata tells.
func lastWrite(o client.Object) time.Time {
	t := o.GetCreationTimestamp().Time
	for _, f := range o.GetManagedFields() {
		if f.Time != nil && f.Time.After(t) {
			t = f.Time.Time
		}
	}
	return t
}

// HeldNow is what holds a due reload of obj now, as Explain says it (an empty Reason when
// nothing is due or nothing holds it), and how soon that may change with no event: the end of
// the coalescing window a change waits for, or of a hold with an end.
func (r *WorkloadReconciler) HeldNow(ctx context.Context, obj client.Object) (reload.Hold, time.Duration, error) {
	e, err := r.Explain(ctx, obj, Supposed{})
	if err != nil {
		return reload.Hold{}, 0, err
	}
	switch {
	case e.Plan.Wait > 0:
		return reload.Hold{}, e.Plan.Wait, nil
	case e.Hold.Reason != "" && !e.Hold.Until.IsZero():
		return e.Hold, max(e.Hold.Until.Sub(r.Now()), 0), nil
	}
	return e.Hold, 0, nil
}

// AssumedChange marks, in Explain's input, the hash of a source that is taken as changed
// since the workload's record although its hash can't be computed: the recorded hash with
// this suffix, so that it differs from the record and keeps its key set (hash.KeySet). It
// only ever lives in an explanation; nothing is written.
const AssumedChange = "~changed"
