package reload

import (
	"time"

	"github.com/reloader-operator/reloader/internal/source"
)

// Observed is one source that concerns a workload, as a reconcile sees it now.
type Observed struct {
	// Hash is the content hash; Absent when the source does not exist.
	Hash string
	// Containers receive the source's env var (see TargetContainers).
	Containers []string
}

// Skip is why a workload must not reload now.
type Skip struct {
	// Reason is short, for metrics ("finished-job"); Why is for people, in Events and logs.
	Reason, Why string
}

// Input is what a reconcile knows about one workload when it plans.
type Input struct {
	Sources map[source.ID]Observed
	// Record is the record on the workload; HasRecord is false when there is none, or it is
	// unreadable.
	Record    Record
	HasRecord bool
	// Baseline is, for a workload without record, the hashes its sources had when reloader
	// first saw it; nil when unknown. A change since then reloads.
	Baseline Record
	Events   Events
	// Skip, when set, says why the workload must not reload now (a finished Job).
	Skip Skip
	// Wait is how long the coalescing window still holds the workload's changes back.
	Wait time.Duration
}

// Plan is what one reconcile of a workload does.
type Plan struct {
	// Wait, when positive, means: write nothing, come back after it.
	Wait time.Duration
	// Changes are the sources whose new content the reload writes into the pod template.
	Changes []Change
	// Skipped are changes that reload nothing, for the reason in Skip; they are recorded.
	Skipped []Change
	Skip    Skip
	// Record is the record to store; WriteRecord is false when the workload has none and
	// nothing concerns it, so it is left without one.
	Record      Record
	WriteRecord bool
}

// Reloads reports whether the plan writes changes into the pod template.
func (p Plan) Reloads() bool { return len(p.Changes) > 0 }

// MakePlan decides a reconcile from its inputs: the changes to apply, the record to store,
// whether to wait for more changes, and whether a reload is skipped.
func MakePlan(in Input) Plan {
	last, hasRecord := in.Record, in.HasRecord
	if !hasRecord && in.Baseline != nil {
		last, hasRecord = in.Baseline, true
	}
	current := make(map[source.ID]string, len(in.Sources))
	for id, o := range in.Sources {
		current[id] = o.Hash
	}
	changed, next := Diff(last, hasRecord, current, in.Events)
	p := Plan{Record: next, WriteRecord: in.HasRecord || len(next) > 0}
	if len(changed) > 0 && in.Wait > 0 {
		return Plan{Wait: in.Wait}
	}
	changes := make([]Change, 0, len(changed))
	for _, id := range changed {
		o := in.Sources[id]
		changes = append(changes, Change{ID: id, Hash: o.Hash, Containers: o.Containers})
	}
	if len(changes) > 0 && in.Skip.Why != "" {
		p.Skipped, p.Skip = changes, in.Skip
		return p
	}
	if len(changes) > 0 {
		p.Changes = changes
	}
	return p
}
