package configstatus

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/termsafe"
	"github.com/reloader-operator/reloader/internal/workload"
)

// HeldFunc says what holds a due reload of obj now (the Hold of reload.Decide, as `reloader
// explain` makes it: empty Reason when none) and how soon that may change on its own (the
// coalescing window's end, the hold's; 0 when only an event changes it).
type HeldFunc func(ctx context.Context, kind workload.Kind, obj client.Object) (h reload.Hold, again time.Duration, err error)

// holds reads, for the targets the status lists, what holds their due reloads, and the
// soonest time one of them may change without an event: the status is read again then, as
// no object changes when a coalescing window closes and a hold begins, or a hold ends.
func (r *Reconciler) holds(ctx context.Context, res *resolution) (map[workloadKey]*v1alpha1.Held, time.Duration) {
	if r.Held == nil {
		return nil, 0
	}
	out := map[workloadKey]*v1alpha1.Held{}
	var soonest time.Duration
	for i, key := range sortedTargets(res.targets) {
		if i == v1alpha1.MaxStatusEntries {
			break
		}
		t := res.targets[key]
		h, again, err := r.Held(ctx, t.kind, t.obj)
		if err != nil {
			log.FromContext(ctx).V(1).Info("could not tell whether a target's reload is held", "kind", t.kind.Name(), "name", t.obj.GetName(), "err", err)
			continue
		}
		if again > 0 && (soonest == 0 || again < soonest) {
			soonest = again
		}
		if h.Reason != "" {
			out[key] = &v1alpha1.Held{Reason: h.Reason, Message: termsafe.ClipNote(h.Why)}
		}
	}
	return out, soonest
}
