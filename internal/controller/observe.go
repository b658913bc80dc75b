package controller

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/reloader-operator/reloader/internal/approval"
	"github.com/reloader-operator/reloader/internal/baseline"
	"github.com/reloader-operator/reloader/internal/coalesce"
	"github.com/reloader-operator/reloader/internal/ledger"
	"github.com/reloader-operator/reloader/internal/lookup"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/whatchanged"
	"github.com/reloader-operator/reloader/internal/whatchanged/track"
	"github.com/reloader-operator/reloader/internal/workload"
	"github.com/reloader-operator/reloader/internal/writer"
)

// observer reads a workload and the sources that concern it into what the reload pipeline
// decides from (seen, then reload.Facts): the observe step of act.go. It is made from the
// reconciler's fields on each use (WorkloadReconciler.observer), so that a test may swap the
// client between reconciles.
type observer struct {
	client client.Client
	kind   workload.Kind
	Settings
	Reads
	baselines *baseline.Baselines
	changes   *track.Changes
	window    *coalesce.Window
	ledger    *ledger.Ledger
}

// observer is what r reads through.
func (r *WorkloadReconciler) observer() observer {
	return observer{client: r.Client, kind: r.Kind, Settings: r.Settings, Reads: r.Reads,
		baselines: r.Baselines, changes: r.Changes, window: r.Window, ledger: r.Ledger}
}

// observe reads the pod template of obj and the sources that concern it; when weighed is not
// nil, it collects each source the decision looked at (explain).
func (ob observer) observe(ctx context.Context, obj client.Object, weighed *[]lookup.Weighed) (seen, error) {
	configs, err := ob.lookup().ConfigsFor(ctx, ob.kind, obj)
	if err != nil {
		return seen{}, err
	}
	return ob.observeWith(ctx, obj, configs, weighed)
}

// observeWith is observe with the ReloaderConfigs that target obj, merged (configs).
func (ob observer) observeWith(ctx context.Context, obj client.Object, configs reloaderconfig.Merged, weighed *[]lookup.Weighed) (seen, error) {
	tw, err := writer.TemplateOf(ctx, ob.client, ob.kind, obj)
	if err != nil {
		return seen{}, err
	}
	rules, errs := ob.Policy.ParseRules(obj.GetAnnotations(), tw.Tpl.Annotations)
	rules.Configs = configs.Rules
	sources, err := ob.lookup().Concerned(ctx, obj.GetNamespace(), tw.Tpl, &rules, weighed)
	if err != nil {
		return seen{}, err
	}
	return seen{tw: tw, sources: sources, invalid: errs, settings: ob.settingsFor(configs.Overrides), overrides: configs.Overrides}, nil
}

// input gathers what the plan is made from. It reads the baselines and forgets nothing:
// explain, run dry, makes it too.
func (ob observer) input(ctx context.Context, obj client.Object, w seen, k string) reload.Input {
	in := reload.Input{
		Sources: make(map[source.ID]reload.Observed, len(w.sources)),
		Events:  ob.Behaviour.Events,
		Skip:    ob.skip(obj, w.settings),
		Wait:    ob.windowWait(k, w.settings.window),
	}
	for id, o := range w.sources {
		in.Sources[id] = reload.Observed{Hash: o.Hash(), Containers: reload.TargetContainers(o.Ref, &w.tw.Tpl.Spec)}
	}
	last, hasRecord := ob.record(ctx, obj)
	in.Record, in.HasRecord = rebase(last, w.sources), hasRecord
	if !hasRecord {
		current := make(map[source.ID]string, len(w.sources))
		for id, o := range w.sources {
			current[id] = o.Hash()
		}
		in.Baseline = ob.baselines.Of(obj, current, baseline.HashAs(ob.Sources, w.sources), func(id source.ID) string {
			if o := w.sources[id].Object(); o != nil {
				return o.GetResourceVersion()
			}
			return ""
		})
	}
	return in
}

// windowWait is how long the coalescing window still holds k's changes back, with the
// window of a ReloaderConfig when one sets it (nil: the flag's).
func (ob observer) windowWait(k string, window *time.Duration) time.Duration {
	if window != nil {
		return ob.window.WaitFor(k, *window)
	}
	return ob.window.Wait(k)
}

// facts gathers what reload.Decide decides from before the gates and the pacer answer: the
// plan's input in, the record, and the workload's pause settings, at now.
func (ob observer) facts(obj client.Object, w seen, in reload.Input, now time.Time) reload.Facts {
	_, recorded, _ := ob.recordOf(obj)
	f := reload.Facts{Input: in, Recorded: recorded, Keys: ob.Policy.Keys, Now: now}
	if _, s, ok := ob.pauseState(obj, w.settings.pausePeriod); ok {
		f.Pause = &s
	}
	return f
}

// recordOf is the workload's record as written: its record annotation, else its entry in
// the ledger of first records; ok is false for neither. The error is the ledger's
// ErrNotLoaded while its first list has not come.
func (ob observer) recordOf(obj client.Object) (v string, ok bool, err error) {
	if v, ok := obj.GetAnnotations()[reload.RecordAnnotation]; ok {
		return v, true, nil
	}
	return ob.ledger.Record(ob.kind.Name(), obj.GetNamespace(), obj.GetName(), obj.GetUID())
}

// record reads the hashes last applied to the workload. An unreadable record counts as none:
// the workload is re-recorded without a reload rather than reloaded on a guess.
func (ob observer) record(ctx context.Context, obj client.Object) (reload.Record, bool) {
	v, ok, _ := ob.recordOf(obj)
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

// skip says why a reload of obj must not happen, if it must not.
func (ob observer) skip(obj client.Object, s settings) reload.Skip {
	if rc, ok := ob.kind.(workload.Recreated); ok && rc.Finished(obj) &&
		!writer.OptedIn(obj, reload.RecreateFinishedAnnotation, s.recreateFinishedJobs) {
		return reload.Skip{Reason: "finished-job", Why: fmt.Sprintf("the Job has finished and re-running finished Jobs is turned off (annotation %s: \"false\", a ReloaderConfig's recreateFinishedJobs: false, or --recreate-finished-jobs=false)", reload.RecreateFinishedAnnotation)}
	}
	return reload.Skip{}
}

// pauseState reads what a pause decision needs from obj, with period as the pause period
// when the workload's annotation sets none; ok is false for kinds that can't pause.
func (ob observer) pauseState(obj client.Object, period *time.Duration) (workload.Pausable, reload.PauseState, bool) {
	p, ok := ob.kind.(workload.Pausable)
	if !ok {
		return nil, reload.PauseState{}, false
	}
	ann := obj.GetAnnotations()
	s := reload.PauseState{Paused: p.Paused(obj)}
	s.PausedAt, s.HasPausedAt = ann[ob.Policy.Keys.PausedAt]
	s.Period, s.HasPeriod = ann[ob.Policy.Keys.PausePeriod]
	if !s.HasPeriod && period != nil && *period > 0 {
		s.Period, s.HasPeriod = period.String(), true
	}
	return p, s, true
}

// settingsFor applies the overrides o of the ReloaderConfigs to the flags.
func (ob observer) settingsFor(o reload.Overrides) settings {
	s := settings{strategy: ob.Strategy, runCronJobs: ob.Behaviour.RunCronJobs,
		recreateFinishedJobs: ob.Behaviour.RecreateFinishedJobs, window: o.CoalesceWindow, pausePeriod: o.PausePeriod,
		minReloadInterval: o.MinReloadInterval, reloadWindow: o.ReloadWindow, mode: approval.Mode(o.Mode),
		waves: o.Waves != nil && *o.Waves, after: o.After}
	if o.Strategy != nil {
		s.strategy = o.Strategy
	}
	if o.RunCronJobs != nil {
		s.runCronJobs = *o.RunCronJobs
	}
	if o.RecreateFinishedJobs != nil {
		s.recreateFinishedJobs = *o.RecreateFinishedJobs
	}
	return s
}

// whatChanged reports, per change of a reload, the key names and the writer of the source's
// change; obj is the workload as read, its record what was last applied. A source created since (Absent
// recorded) is reported with all its keys added, a deleted one with no keys.
func (ob observer) whatChanged(w seen, obj client.Object, changes []reload.Change) []whatchanged.Report {
	// Parsed again, quietly: the plan reads the record, and logs it when unreadable.
	v, _, _ := ob.recordOf(obj)
	last, _ := reload.ParseRecord(v)
	out := make([]whatchanged.Report, len(changes))
	for i, ch := range changes {
		o, ok := w.sources[ch.ID]
		st := ob.sourceType(ch.ID.Kind)
		if !ok || o.Object() == nil || st == nil || st.Pool != nil {
			continue
		}
		var keys whatchanged.Keys
		if st.KeyDigests != nil {
			var only []string
			if o.Restricted {
				only = append([]string{}, o.Keys...)
			}
			if was, recorded := last[ch.ID.String()]; recorded && was == reload.Absent {
				keys = whatchanged.Diff(nil, st.KeyDigestsOf(o.Object()), only)
			} else {
				keys, _ = ob.changes.Keys(*st, o.Object().GetNamespace(), ch.ID, o.Object(), only, last[ch.ID.String()])
			}
		}
		wr, known := ob.changes.Writer(*st, o.Object().GetNamespace(), ch.ID, o.Object())
		out[i] = whatchanged.NewReport(keys, wr, known)
	}
	return out
}

// writers are who wrote each existing source of w last, for explain.
func (ob observer) writers(w seen) map[source.ID]whatchanged.Writer {
	out := map[source.ID]whatchanged.Writer{}
	for id, o := range w.sources {
		if st := ob.sourceType(id.Kind); st != nil && o.Object() != nil && st.Pool == nil {
			if wr, ok := st.Writer(o.Object()); ok {
				out[id] = wr
			}
		}
	}
	return out
}

// sourceType is the type of the sources of kind; nil when not watched.
func (ob observer) sourceType(kind source.Kind) *sourcecache.SourceType {
	for i := range ob.Sources {
		if ob.Sources[i].Kind == kind {
			return &ob.Sources[i]
		}
	}
	return nil
}

// lookup is the seam through which r reads sources, indexes and ReloaderConfigs: the
// reconciler's own fields, so that a test may swap its client between reconciles.
func (ob observer) lookup() lookup.Lookup {
	return lookup.Lookup{Client: ob.client, Sources: ob.Sources, Policy: ob.Policy, Configs: ob.Configs, Namespaces: ob.Namespaces}
}

// live reports whether ob.kind is read without watch (degraded mode, lookup.Unwatched).
func (ob observer) live() bool { return ob.Unwatched.Has(ob.kind.Name()) }

// settings are the flags' behaviour for one workload, with the overrides of the
// ReloaderConfigs that target it applied.
type settings struct {
	strategy             reload.Strategy
	runCronJobs          bool
	recreateFinishedJobs bool
	// window is the coalescing window when a config sets one; nil keeps the flag's.
	window *time.Duration
	// pausePeriod is the pause period when a config sets one and the workload's own
	// annotation does not.
	pausePeriod *time.Duration
	// minReloadInterval and reloadWindow pace the reloads when a config sets them and the
	// workload's own annotations do not.
	minReloadInterval *time.Duration
	reloadWindow      string
	// mode is a config's mode (approval.go); "" keeps --mode.
	mode approval.Mode
	// waves is a config's opt-in to health-gated waves (waves.go); after are the workloads
	// its targets' after lists name.
	waves bool
	after []string
}
