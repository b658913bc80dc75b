package metrics

import "time"

// Reconcile is one reconcile as it ends, told to a ReconcileHook.
type Reconcile struct {
	// Kind names what was reconciled: a workload kind (workload.Kind.Name), or the rollout
	// follower's, the webhook notifier's or the generic targets' kind of their own
	// (rollout.FollowerKind, webhook.NotifierKind, generic.HookKind). Namespace and Name are
	// the request's.
	Kind, Namespace, Name string
	// Outcome is the value of reloader_workload_reconcile_total's outcome label.
	Outcome string
	// Started is when the reconcile began: every read it made from the cache came after.
	Started time.Time
}

// A ReconcileHook hears of each reconcile as it ends. The envtests set one
// (Metrics.Hook) to wait for reloader to have handled what they wrote before they check that
// nothing else happened; reloader itself sets none. It is called on the reconciling
// goroutine and must return quickly.
type ReconcileHook func(Reconcile)

// Ended tells m's hook, if any, of one reconcile (m may be nil).
func (m *Metrics) Ended(r Reconcile) {
	if m != nil && m.Hook != nil {
		m.Hook(r)
	}
}

// OutcomeOf is the outcome of a reconcile that returned err and decides nothing else: ""
// when it succeeded, OutcomeError when not.
func OutcomeOf(err error) string {
	if err != nil {
		return OutcomeError
	}
	return ""
}
