package controller

import (
	"context"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/reloader-operator/reloader/internal/flap"
	"github.com/reloader-operator/reloader/internal/gate/mode"
	"github.com/reloader-operator/reloader/internal/gate/quarantine"
	"github.com/reloader-operator/reloader/internal/gate/wave"
	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/hashkey"
	"github.com/reloader-operator/reloader/internal/lookup"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/workload"
)

// What the gates of internal/gate read of the workloads, given to them as narrow functions and
// interfaces: a gate never holds a reconciler.

// WaveCluster is what the wave gate reads of the workloads of every kind of rs (a source's
// members are of any kind): the members a source concerns, found through each kind's index as a
// source event finds them, and whether each applied the source's content, as its own reconcile
// would find.
func WaveCluster(rs []*WorkloadReconciler) wave.Cluster {
	c := waveCluster(slices.Clone(rs))
	slices.SortFunc(c, func(a, b *WorkloadReconciler) int { return strings.Compare(a.Kind.Name(), b.Kind.Name()) })
	return c
}

type waveCluster []*WorkloadReconciler

func (c waveCluster) Kinds() []workload.Kind {
	out := make([]workload.Kind, len(c))
	for i, r := range c {
		out[i] = r.Kind
	}
	return out
}

func (c waveCluster) of(kind workload.Kind) *WorkloadReconciler {
	for _, r := range c {
		if r.Kind.Name() == kind.Name() {
			return r
		}
	}
	return nil
}

func (c waveCluster) Affected(ctx context.Context, kind workload.Kind, ns string, id source.ID, annotations, labels map[string]string) []client.Object {
	r := c.of(kind)
	if r == nil {
		return nil
	}
	return r.observer().lookup().Affected(ctx, kind, ns, id, annotations, labels)
}

func (c waveCluster) Content(id source.ID, obj client.Object) (string, bool) {
	if len(c) == 0 {
		return "", false
	}
	st := c[0].observer().sourceType(id.Kind)
	if st == nil || st.Pool != nil {
		return "", false // a CSI mount: no content to stage
	}
	return st.ContentHash(obj), true
}

func (c waveCluster) Applied(ctx context.Context, kind workload.Kind, obj client.Object, id source.ID) (applied, recorded bool, err error) {
	r := c.of(kind)
	if r == nil {
		return true, false, nil
	}
	rec, has := r.observer().record(ctx, obj)
	if !has {
		return false, false, nil
	}
	w, err := r.observer().observe(ctx, obj, nil)
	if err != nil {
		return false, true, err
	}
	o, ok := w.sources[id]
	if !ok {
		return true, true, nil
	}
	changed, _ := reload.Diff(rebase(rec, w.sources), true, map[source.ID]string{id: o.Hash()}, r.Behaviour.Events)
	return len(changed) == 0, true, nil
}

// InstallKey is the install key that seals r's records (the quarantine gate's), as r reads it:
// not Valid when there is none; an error while it has not loaded.
func InstallKey(r *WorkloadReconciler) func(context.Context) (hash.Key, error) {
	return func(ctx context.Context) (hash.Key, error) { return hashkey.Signing(ctx, r.RecordKey) }
}

// Event reasons of the gates, as the controller's tests and tools name them.
const (
	ReasonSourceQuarantined  = quarantine.ReasonSourceQuarantined
	ReasonQuarantineReleased = quarantine.ReasonQuarantineReleased
	ReasonApprovalPending    = mode.ReasonApprovalPending
	ReasonWavesHalted        = wave.ReasonWavesHalted
	ReasonWavesCycle         = wave.ReasonWavesCycle
	ReasonWavesAborted       = wave.ReasonWavesAborted
)

// ObserveFlaps feeds a source type's content changes, with their writers, to the flap
// breaker's table flaps, at now: an observer of the source events (lookup.SourceEvents).
func ObserveFlaps(flaps *flap.Table, now func() time.Time) lookup.Observer {
	return func(st sourcecache.SourceType) predicate.Predicate {
		return predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				if flaps == nil || st.Pool != nil {
					return true
				}
				// The manager whose entry this write changed (copied out of the cache's string).
				wr, _ := sourcecache.ChangeWriter(e.ObjectOld, e.ObjectNew)
				quarantine.Observe(flaps, st.Kind, e.ObjectNew, sourcecache.CachedHash(e.ObjectOld), sourcecache.CachedHash(e.ObjectNew), wr, now())
				return true
			},
			DeleteFunc: func(e event.DeleteEvent) bool {
				quarantine.Gone(flaps, st.Kind, e.Object)
				return true
			},
		}
	}
}
