package app

import (
	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/gate"
	"github.com/reloader-operator/reloader/internal/gate/window"
)

// Gates are the guardrails of the workload reconciler r's reload pipeline, in their order of
// precedence, written here only: the flap breaker's quarantine, mode notify, the health-gated
// waves, mode approve, then the workload's own interval and window. The rate limiter is the
// step after them (the pacer). The first hold in this order wins; a notice counts when no gate
// before it holds. Build it once r's policy caches are set.
func Gates(r *controller.WorkloadReconciler) gate.Chain {
	return gate.Chain{
		controller.QuarantineGate(r),
		controller.NotifyGate(r),
		controller.WaveGate(r),
		controller.ApproveGate(r),
		window.Gate{MinInterval: r.MinReloadInterval, Caches: r.Policy.Caches},
	}
}
