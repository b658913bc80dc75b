// Package controller reconciles workloads against the sources they depend on: one generic
// reconciler serves every workload kind.
package controller

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reloader-operator/reloader/internal/baseline"
	"github.com/reloader-operator/reloader/internal/coalesce"
	"github.com/reloader-operator/reloader/internal/controller/rollout"
	"github.com/reloader-operator/reloader/internal/flap"
	"github.com/reloader-operator/reloader/internal/gate"
	"github.com/reloader-operator/reloader/internal/hashkey"
	"github.com/reloader-operator/reloader/internal/ledger"
	"github.com/reloader-operator/reloader/internal/lookup"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/pace"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
	"github.com/reloader-operator/reloader/internal/report"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/whatchanged/track"
	"github.com/reloader-operator/reloader/internal/workload"
	"github.com/reloader-operator/reloader/internal/writer"
	"github.com/reloader-operator/reloader/internal/writer/evict"
)

// FieldOwner is the field manager of every write, upstream's name.
const FieldOwner = writer.FieldOwner

// Event reasons (the reporter's).
const (
	ReasonReloaded          = report.ReasonReloaded
	ReasonReloadFail        = report.ReasonReloadFail
	ReasonReloadSkipped     = report.ReasonReloadSkipped
	ReasonInvalidAnnotation = report.ReasonInvalidAnnotation
	ReasonResumed           = report.ReasonResumed
	ReasonReloadHeld        = report.ReasonReloadHeld
	ReasonReloadNotified    = report.ReasonReloadNotified
)

// WorkloadReconciler brings one kind of workload in line with its sources: when the content
// of a source that concerns a workload differs from the hash recorded on the workload, it
// writes the new hashes into the pod template and the record, in one patch. Each reconcile
// runs the reload pipeline (act.go): observe -> plan -> the gates -> the rate -> write ->
// report. Its collaborators are given, grouped by what they are for.
type WorkloadReconciler struct {
	Client client.Client
	Kind   workload.Kind
	// Settings are the flags that shape the decisions and the writes.
	Settings
	// Reads are what the reconciler reads besides its client: the sources, the
	// ReloaderConfigs, the namespaces it serves.
	Reads
	// Writes are what the writers need besides the client.
	Writes
	// Observers are fed by the source watches, once per event, and read by the decisions.
	Observers
	// Window is the coalescing window, shared by the reconcilers of one manager.
	Window *coalesce.Window
	// Gates are the guardrails of the reload pipeline, in their order (internal/app builds
	// them); nil holds nothing.
	Gates gate.Chain
	// Pacer spreads reloads and first records over time (--reload-rate), asked after the
	// gates; nil paces nothing.
	Pacer *pace.Pacer
	// Report is the one reporter: Events, metrics, alerts, and what is said once.
	Report *report.Reporter
	Now    func() time.Time

	// parts are the kind's writers, made once, and what they keep between reconciles.
	parts writeParts
}

// Settings are the flags that shape a reconciler's decisions and writes.
type Settings struct {
	Policy    reload.Policy
	Behaviour Behaviour
	Strategy  reload.Strategy
	// Workers is how many workloads of this kind reconcile at once.
	Workers int
	// ReconcileTimeout bounds each reconcile (--reconcile-timeout), so that a hung API call
	// frees its worker; 0: unbounded.
	ReconcileTimeout time.Duration
	// EnableEvict runs the evict restart strategy (--enable-evict-strategy, evict.Restarter);
	// without it a workload that asks for it is told, and its reloads wait.
	EnableEvict bool
}

// Reads are what a reconciler reads besides its client.
type Reads struct {
	Sources []sourcecache.SourceType
	// Namespaces selects, by label, the namespaces whose workloads reload; nil selects all.
	// It is read on each reconcile, so a namespace gaining or losing a label counts at once.
	Namespaces labels.Selector
	// Configs compiles the ReloaderConfigs whose rules add to the annotations; nil when the
	// ReloaderConfig API is not served, and only annotations apply.
	Configs *reloaderconfig.Cache
	// Unwatched, when set, names the kinds read without watch (degraded mode); nil watches
	// every kind.
	Unwatched *lookup.Unwatched
	// Shard, when set, tells whether a namespace belongs to this replica's shards (--shards)
	// and whether every kind has been listed since it was taken: the others' workloads are
	// left to their owners, even while a shard handed over is still cached, and a shard just
	// taken waits for its sources to arrive.
	Shard func(namespace string) (own, ready bool)
}

// Writes are what a reconciler's writers need besides its client.
type Writes struct {
	// APIReader reads past the cache; nil reads through Client. A pending Job replacement
	// asks it whether the old Job is really still there (jobreplace).
	APIReader client.Reader
	// RecordKey is the install key that signs Job replacement records (jobreplace); nil, or a
	// key that is not valid, trusts only the records this process wrote.
	RecordKey sourcecache.KeySource
	// Rollouts follows the rollout after each reload; nil follows none.
	Rollouts *rollout.Rollouts
	// Ledger keeps first records apart from the workloads (internal/ledger): a workload
	// reloader has not reloaded is not written for its record. nil writes them onto the
	// workloads.
	Ledger *ledger.Ledger
}

// Observers are fed by the source watches and shared by the reconcilers of one manager.
type Observers struct {
	// Baselines note the changes that workloads without record missed; nil gives this
	// reconciler its own.
	Baselines *baseline.Baselines
	// Changes tell which keys a source's latest change added, removed and changed, for the
	// reports; nil names none.
	Changes *track.Changes
	// Flaps is the flap breaker's table: the source watches feed it, the quarantine gate reads
	// it; nil breaks no flap.
	Flaps *flap.Table
	// SourceEvents hears each source event once for every kind of one manager
	// (lookup.SourceEvents), its observers first; nil: this reconciler's own, observing
	// for itself (Changes, Flaps).
	SourceEvents *lookup.SourceEvents
}

// Reloaded is one reload written.
type Reloaded = report.Reloaded

// Behaviour holds the flags that change what a reload does.
type Behaviour struct {
	Events reload.Events
	// RunCronJobs also starts a Job when a CronJob reloads (upstream's behaviour).
	RunCronJobs bool
	// RecreateFinishedJobs also replaces Jobs that have completed or failed, as upstream
	// does; --recreate-finished-jobs defaults to it.
	RecreateFinishedJobs bool
}

// Reconcile implements reconcile.Reconciler.
func (r *WorkloadReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	started := time.Now()
	res, outcome, err := r.reconcile(ctx, req)
	if retry, inRow, ok := r.writeParts().conflicts.Retry(req.NamespacedName, err); ok {
		logger := log.FromContext(ctx)
		if inRow >= writer.ConflictsLogged {
			logger.Info("writes keep meeting a newer version; retrying later", "conflictsInRow", inRow, "retryIn", retry.RequeueAfter, "error", err.Error())
		} else {
			logger.V(1).Info("write met a newer version; planning again from it", "error", err.Error())
		}
		res, outcome, err = retry, metrics.OutcomeConflict, nil
	}
	if errors.Is(err, hashkey.ErrNotLoaded) {
		// A wait for the install key (a quarantine record to read, a record to sign), at a
		// steady pace: as a failure, its backoff grew while the key was refused and kept the
		// reload waiting as long after the key loaded.
		log.FromContext(ctx).V(1).Info("waiting for the install key", "retryIn", hashkey.RetryEvery.String(), "error", err.Error())
		res, outcome, err = reconcile.Result{RequeueAfter: hashkey.RetryEvery}, metrics.OutcomeWaiting, nil
	}
	if err != nil {
		outcome = metrics.OutcomeError
	}
	r.Report.Metrics.Reconciled(r.Kind.Name(), outcome, time.Since(started))
	r.Report.Metrics.Ended(metrics.Reconcile{Kind: r.Kind.Name(), Namespace: req.Namespace, Name: req.Name, Outcome: outcome, Started: started})
	return res, err
}

// reconcile reads the workload and its sources, plans (reload.MakePlan, pure) and executes
// the plan: one write, then one report.
func (r *WorkloadReconciler) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, string, error) {
	if r.Shard != nil {
		switch own, ready := r.Shard(req.Namespace); {
		case !own:
			// Another replica holds it now; the schedule of a held reload is on the object.
			r.forget(r.windowKey(req.NamespacedName), r.Now())
			return reconcile.Result{}, metrics.OutcomeIgnored, nil
		case !ready:
			return reconcile.Result{RequeueAfter: 500 * time.Millisecond}, metrics.OutcomeWaiting, nil
		}
	}
	started := r.Now()
	k := r.windowKey(req.NamespacedName)
	obj := r.Kind.NewObject()
	err := r.Client.Get(ctx, req.NamespacedName, obj)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, "", err
	}
	if res, handled, err := r.resume(ctx, req.NamespacedName, obj, err == nil); handled {
		return res, metrics.OutcomeReloaded, err
	}
	if err != nil || !obj.GetDeletionTimestamp().IsZero() {
		if err != nil {
			r.Ledger.Drop(r.Kind.Name(), req.Namespace, req.Name) // gone: its entry goes too
		}
		r.forget(k, started)
		return reconcile.Result{}, metrics.OutcomeUnchanged, nil
	}
	if selected, err := r.observer().lookup().NamespaceSelected(ctx, obj.GetNamespace()); err != nil || !selected {
		// Left as it is, record included: if the namespace is selected again, changes made
		// meanwhile are caught up then.
		r.forget(k, started)
		return reconcile.Result{}, metrics.OutcomeIgnored, err
	}
	return r.reconcileCopy(ctx, obj, k, started)
}

// reconcileCopy decides from obj, the copy of the workload read, and acts on the decision:
// read -> reload.Decide -> act -> one report.
func (r *WorkloadReconciler) reconcileCopy(ctx context.Context, obj client.Object, k string, started time.Time) (reconcile.Result, string, error) {
	_, recorded, err := r.observer().recordOf(obj)
	if errors.Is(err, ledger.ErrNotLoaded) {
		// Its record may be in the ledger, not listed yet: a first sighting now could take
		// a change made while reloader was down as the record.
		return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, metrics.OutcomeWaiting, nil
	}
	if !recorded && !r.Baselines.Synced() {
		// A first record taken before the baseline handlers heard the first list could miss
		// a change made meanwhile; they catch up within moments of the caches' sync.
		return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, metrics.OutcomeWaiting, nil
	}
	configs, err := r.observer().lookup().ConfigsFor(ctx, r.Kind, obj)
	if err != nil {
		return reconcile.Result{}, "", err
	}
	if wait := r.observer().windowWait(k, configs.Overrides.CoalesceWindow); wait > 0 && recorded {
		// A source that concerns it changed within the window (mapping.go touches it only
		// then): the plan would wait for it, so the sources are read when it closes. A first
		// sighting reads them now, to note its baseline.
		return coalescing(ctx, r.Report, k, wait)
	}
	w, err := r.observer().observeWith(ctx, obj, configs, nil)
	if err != nil {
		return reconcile.Result{}, "", err
	}
	// A first sighting waits for the handlers (baseline_recent.go).
	if !recorded && !r.Baselines.Heard(obj, w.sources, r.observer().live()) {
		return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, metrics.OutcomeWaiting, nil
	}
	r.invalid(ctx, obj, w.invalid...)
	in := r.observer().input(ctx, obj, w, k)
	if in.HasRecord {
		r.Baselines.Drop(obj.GetUID()) // its record is seen: the notes have served
	}
	f := r.observer().facts(obj, w, in, started)
	reloads := reload.MakePlan(f.Input).Reloads()
	if w.restart = r.writeParts().evict.ModeOf(ctx, obj, reloads); w.restart == evict.Off && reloads {
		return r.writeParts().evict.Held(ctx, obj)
	}
	res, outcome, err := r.act(ctx, obj, w, f, k)
	if err != nil {
		return res, outcome, err
	}
	return r.writeParts().evict.Step(ctx, obj, w.restart, res, outcome)
}

// seen is a workload and the sources that concern it, as one reconcile reads them.
type seen struct {
	tw      writer.Template
	sources map[source.ID]sourcecache.Observed
	// invalid are the workload's annotations that could not be parsed.
	invalid []error
	// settings are the flags' behaviour, with the overrides of the ReloaderConfigs applied;
	// overrides are those overrides, as the gates read them.
	settings  settings
	overrides reload.Overrides
	// restart is how the workload's pods restart (evict.Restarter).
	restart evict.Mode
}

// forget drops what the reconciler keeps about a workload that is gone or no longer selected.
func (r *WorkloadReconciler) forget(k string, now time.Time) {
	r.Window.Done(k, now)
	r.Pacer.Forget(k, now)
	r.Gates.Forget(k)
	r.Report.Forget(k)
}

// invalid reports bad annotations; the valid rules still apply.
func (r *WorkloadReconciler) invalid(ctx context.Context, obj client.Object, errs ...error) {
	r.Report.Invalid(ctx, obj, errs...)
}

// windowKey names a workload in the coalescing window.
func (r *WorkloadReconciler) windowKey(nn types.NamespacedName) string {
	return r.Kind.Name() + "/" + nn.String()
}

func setAnnotation(obj client.Object, key, value string) {
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[key] = value
	obj.SetAnnotations(ann)
}
