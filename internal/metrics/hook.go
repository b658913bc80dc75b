package metrics

import "time"

// Reconcile is one workload reconcile as it ends, told to a ReconcileHook.
type Reconcile struct {
	// Kind is the workload kind's name (workload.Kind.Name); Namespace and Name the workload's.
	Kind, Namespace, Name string
	// Outcome is the value of reloader_workload_reconcile_total's outcome label.
	Outcome string
	// Started is when the reconcile began: every read it made from the cache came after.
	Started time.Time
}

// A ReconcileHook hears of each workload reconcile as it ends. The envtests set one
// (Metrics.Hook) to wait for reloader to have handled what they wrote before they check that
// nothing else happened; reloader itself sets none. It is called on the reconciling
// goroutine and must return quickly.
type ReconcileHook func(Reconcile)

// Ended tells m's hook, if any, of one workload reconcile.
func (m *Metrics) Ended(r Reconcile) {
	if m.Hook != nil {
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
