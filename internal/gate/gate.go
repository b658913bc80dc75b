// Package gate is the seam between a due reload and the guardrails that may hold it.
//
// A reload goes through one pipeline, for every target kind (built-in workloads, Argo
// Rollouts, DeploymentConfigs, generic targets):
//
//	plan (reload.Decide) -> gates, in one ordered Chain -> rate -> writer -> reporter
//
// Each guardrail (the flap breaker's quarantine, the mode, health-gated waves, the workload's
// own interval and window) is a Gate in a package of its own. A gate reads a Due, a read-only
// view of one reconcile's due reload, and answers with a Verdict: hold (why, until when),
// notify only, annotations to write with the reconcile's own write, notices for the reporter.
// A gate never writes to the API server, never records an Event and never sees the reconciler:
// what it has to say goes through its Verdict, and the reporter says it.
//
// The order of the gates is the order of the Chain, written once (internal/app). Every gate is
// asked on every reconcile, also when nothing is due or an earlier gate holds (Due.Ahead), so
// that it can forget or release what it keeps: the first hold in chain order wins, the holds of
// the gates after it are not applied, their annotations and notices are.
//
// explain and plan run the same Chain with Due.DryRun set: a gate then reserves nothing,
// remembers nothing, and its notices are rendered, not reported.
package gate

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/alert"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/whatchanged"
)

// Due is what a gate sees of one reconcile of a target. It is read-only: a gate that changes
// anything reachable from it (the target, a source, a map) is wrong.
type Due struct {
	// Key names the target in reloader's tables: "<Kind>/<namespace>/<name>".
	Key string
	// Kind is the target's kind, as `reloader explain` and Events name it (Deployment, or a
	// generic target's kind).
	Kind string
	// Target is the target as read by this reconcile.
	Target client.Object
	// Changes are the changes due now, in plan order; empty when nothing is due (the gate
	// then forgets what it kept for this target, and may ask to remove its annotations).
	// The changes an earlier gate settled (Verdict.Settled) are not among them.
	Changes []reload.Change
	// What, when set, tells each of changes' keys and writer (in their order), for notices;
	// it may cost a read of the change table, so a gate asks only for what it says.
	What func(changes []reload.Change) []whatchanged.Report
	// Sources are the sources that concern the target, by id.
	Sources map[source.ID]Source
	// Overrides are the settings of the ReloaderConfigs that target it (mode, waves, interval,
	// window), applied over the flags; zero when none.
	Overrides reload.Overrides
	// Related is the source the reconcile's Events refer to: the first changed one.
	Related client.Object
	// Ahead is the hold of an earlier gate of the chain, nil when none holds; Notify is true
	// when an earlier gate turned the reload into a notice.
	Ahead  *Held
	Notify bool
	// Live is true when the target's kind is read without watch (degraded mode): no event
	// tells of a change made on it, so a gate that waits on the target polls (Verdict.Requeue).
	Live bool
	// Now is the time of the decision.
	Now time.Time
	// DryRun is true for explain and plan: reserve nothing, remember nothing.
	DryRun bool
}

// Source is a source as the gates see it.
type Source struct {
	// Object is the source as cached; nil when it does not exist. Read-only.
	Object client.Object
	// Hash is its content hash, as the plan compares it.
	Hash string
	// Annotations are the source's annotations (its mode, its waves), nil when it is absent.
	Annotations map[string]string
	// Written is when its current content was written, as its newest writer tells
	// (managedFields); zero when unknown (a deleted source, a CSI mount).
	Written time.Time
}

// Held is a hold and the gate that holds.
type Held struct {
	Gate string
	reload.Hold
}

// Verdict is a gate's answer for one Due.
type Verdict struct {
	// Hold, when its Reason is set, holds the reload until Hold.Until (zero: until the gate
	// lets it go, on a later event or Requeue).
	Hold reload.Hold
	// Notify turns the due reload into a notice: nothing rolls, the record advances.
	Notify bool
	// Settled are due changes taken as applied without rolling (an aborted wave's content):
	// the record takes their hashes, the reload does not. The gates after see Due.Changes
	// without them.
	Settled []reload.Change
	// Annotate are annotations written on the target with this reconcile's write (a nil value
	// removes the key). They are written whether or not the reload goes: a gate keeps its
	// state on the object this way (a quarantine, a pending approval), or spends it (an
	// approval) when the reload goes, with Spend.
	Annotate map[string]*string
	// Spend are annotations written only when the reload is written in this reconcile.
	Spend map[string]*string
	// Notices are what the reporter tells of this verdict.
	Notices []Notice
	// Requeue asks for the target to be decided again within this time; 0: no need.
	Requeue time.Duration
	// Invalid are settings the gate could not read; it decided without them.
	Invalid []error
}

// Notice is one thing a gate has to say: an Event on the target (and a log line), said once
// per Once key.
//
// "Once" is kept by the reporter, per target, gate and Reason: a notice whose Once value is the
// one the same gate last said with the same Reason for the same target is not said again (it
// is logged at debug level), so a gate gives its notice on every Check while the thing lasts
// (a hold, a pending approval), and it is said when it begins, when it changes, and again if
// it ends and comes back. A gate gives at most one notice with a Once of a Reason per Check.
// A DryRun's notices are rendered, never said. What must be said once across targets (one
// alert per halted source) is the gate's own state.
type Notice struct {
	// Warning makes the Event a Warning; Normal otherwise.
	Warning bool
	Reason  string
	// Action is the Event's action (events.k8s.io/v1).
	Action  string
	Message string
	// Once, when set, is said once per target and Once value, until the gate's state for the
	// target is forgotten (a new hold, a new content, a new signature); empty: every time.
	Once string
	// Quiet notices are logged at debug level and get no Event.
	Quiet bool
	// Written notices are said only when this reconcile's write went through (mode notify:
	// the record that names the notified changes).
	Written bool
	// Alert, when set, is queued to the alert sinks as the notice is said.
	Alert *alert.Reload
	// Count are the gate's counters incremented as the notice is said (once, as it is).
	Count []prometheus.Counter
	// Held, when set, makes the notice the announcement of a hold of this reason: said, it
	// counts once in reloader_reloads_held_total.
	Held string
}

// Gate is one guardrail of the pipeline.
type Gate interface {
	// Name names the gate in holds, metrics and explain ("quarantine", "mode", "wave", ...).
	Name() string
	// Check answers for one reconcile of a target.
	Check(ctx context.Context, d Due) (Verdict, error)
}

// Forgetter is a gate that keeps per-target state: Forget drops it when the target is gone,
// no longer selected, or handed to another replica.
type Forgetter interface {
	Forget(key string)
}

// Chain is the ordered list of gates. Its order is the precedence of the guardrails.
type Chain []Gate

// Result is what a Chain makes of one Due.
type Result struct {
	// Held is the first hold in chain order; nil when no gate holds.
	Held *Held
	// Notify is set when a gate before any hold turned the reload into a notice; NotifiedBy
	// names it.
	Notify     bool
	NotifiedBy string
	// Annotate and Spend gather every gate's, later gates' keys winning.
	Annotate map[string]*string
	Spend    map[string]*string
	// Settled are every gate's settled changes, in chain order.
	Settled []reload.Change
	// Notices are every gate's, in chain order, with the gate that said each.
	Notices []Said
	// Requeue is the soonest requeue any gate asked for; 0: none.
	Requeue time.Duration
	Invalid []error
}

// Said is a notice and its gate.
type Said struct {
	Gate string
	Notice
}

// Check asks every gate in order. Each sees the hold and notify of the gates before it; the
// first hold wins, and a notify only counts when no gate before it holds. An error stops the
// chain: the reconcile fails and is retried.
func (c Chain) Check(ctx context.Context, d Due) (Result, error) {
	var res Result
	for _, g := range c {
		d.Ahead, d.Notify = res.Held, res.Notify
		v, err := g.Check(ctx, d)
		if err != nil {
			return Result{}, err
		}
		switch {
		case res.Held != nil || res.Notify:
		case v.Hold.Reason != "":
			res.Held = &Held{Gate: g.Name(), Hold: v.Hold}
		case v.Notify:
			res.Notify, res.NotifiedBy = true, g.Name()
		}
		if len(v.Settled) > 0 {
			res.Settled = append(res.Settled, v.Settled...)
			d.Changes = slices.DeleteFunc(slices.Clone(d.Changes), func(c reload.Change) bool {
				return slices.ContainsFunc(v.Settled, func(s reload.Change) bool { return s.ID == c.ID })
			})
		}
		res.Annotate = merge(res.Annotate, v.Annotate)
		res.Spend = merge(res.Spend, v.Spend)
		for _, n := range v.Notices {
			res.Notices = append(res.Notices, Said{Gate: g.Name(), Notice: n})
		}
		if v.Requeue > 0 && (res.Requeue == 0 || v.Requeue < res.Requeue) {
			res.Requeue = v.Requeue
		}
		res.Invalid = append(res.Invalid, v.Invalid...)
	}
	return res, nil
}

// Forget drops every gate's state of the target named key.
func (c Chain) Forget(key string) {
	for _, g := range c {
		if f, ok := g.(Forgetter); ok {
			f.Forget(key)
		}
	}
}

// Names are the gates' names in order, for explain and the documentation.
func (c Chain) Names() []string {
	names := make([]string, len(c))
	for i, g := range c {
		names[i] = g.Name()
	}
	return names
}

func merge(into, from map[string]*string) map[string]*string {
	if len(from) == 0 {
		return into
	}
	if into == nil {
		into = make(map[string]*string, len(from))
	}
	maps.Copy(into, from)
	return into
}
