package reload

import "time"

// Outcomes that a Decision settles before anything is written; the values of the
// reloader_workload_reconcile_total outcome label (metrics.OutcomeWaiting, OutcomeHeld).
const (
	OutcomeWaiting = "waiting"
	OutcomeHeld    = "held"
)

// Facts are what one reconcile read of a workload, what the gates answered, and what pacing
// answered when Decide asked for it. Nothing in them reads a clock or the cluster: the
// reconciler and `reloader explain` gather them through the same pipeline (one function of the
// controller), and Decide turns them into the same Decision.
type Facts struct {
	// Input is what the plan is made from (MakePlan).
	Input Input
	// Recorded is true when the workload carries a record annotation, readable or not.
	Recorded bool
	// Pause is the pause state of a workload of a kind that can pause; nil for the others.
	Pause *PauseState
	// Keys name the annotations, for PlanPause's messages.
	Keys Keys
	// Now is the time of the decision.
	Now time.Time
	// RateWait is the rate limiter's answer for a reload that is due and not held by a
	// gate: how long it waits for its slot, 0 for a slot now. nil: not
	// asked; Decide then asks for it (Decision.AskRate). Rate names the limiter, for Hold.Why.
	RateWait *time.Duration
	Rate     string
	// FirstSightWait is the pacer's answer for a first record: how long it waits, 0 for now.
	// nil: not asked; Decide then asks for it (Decision.AskFirstSight).
	FirstSightWait *time.Duration
	// Gate is what the gates of the pipeline (internal/gate's Chain) answered for the due
	// reload: the first hold in their order, or a notice in place of the reload. Zero when none
	// holds, or nothing is due.
	Gate Gated
	// Unrolled is true when writing the due changes leaves the pod template as it was (the
	// values are there already): nothing rolls, and no pause period starts.
	Unrolled bool
}

// Gated is the gates' answer for a due reload, in their order: Hold (its Reason set) when one
// holds it, else Notify when one turns it into a notice (nothing rolls, the record advances).
type Gated struct {
	Hold   Hold
	Notify bool
}

// Decision is what one reconcile of a workload does, and why: the plan, whether pacing holds
// it, what is written, the pause-period step, when to come back, and the outcome when the
// decision settles it. The reconciler acts on it; `reloader explain` renders it.
type Decision struct {
	// Plan is the plan as made (MakePlan), a held reload's changes included.
	Plan Plan
	// AskRate and AskFirstSight say that Decide needs the pacer's answer to go on
	// (Facts.RateWait, Facts.FirstSightWait): the caller asks, which reserves a slot, and
	// decides again with the answer. Nothing else in the Decision is set then but Plan.
	AskRate, AskFirstSight bool
	// Hold is, when the plan reloads, the gates' hold, else the rate limiter's: Hold.Reason
	// is empty when the reload goes now.
	Hold Hold
	// GiveBack is true when a rate slot the workload may hold goes back: nothing is due any
	// more, or its own settings hold it (it takes a slot when that hold ends).
	GiveBack bool
	// Reload are the changes written into the pod template now; nil when none is due, or the
	// reload is held.
	Reload []Change
	// WriteRecord is true when Plan.Record is written (never while a reload is held: the
	// record would claim the held changes).
	WriteRecord bool
	// Pause is the pause-period step of a kind that can pause.
	Pause PauseStep
	// Requeue is when the workload is decided again; 0: on its next event.
	Requeue time.Duration
	// Outcome is OutcomeWaiting or OutcomeHeld when the decision settles the reconcile's
	// outcome; empty when what the write does settles it.
	Outcome string
	// Notified are the due changes reported instead of rolled (Facts.Gate.Notify); the record
	// that names them is written.
	Notified []Change
}

// Decide composes one reconcile of a workload from the facts: the plan (MakePlan), then, for
// a plan that waits for the coalescing window, nothing more; for a due reload, the gates' hold,
// else for a notice the record alone (nothing rolls, nothing is paced), else the rate
// limiter's slot; for a first record, the pacer's turn; then what is written, the pause-period
// step (PlanPause) and when to come back. It is pure.
func Decide(f Facts) Decision {
	d := Decision{Plan: MakePlan(f.Input)}
	p := d.Plan
	if p.Wait > 0 {
		// Nothing is written; the pause step is the one that stands, for explain.
		d.Pause = f.pause(false)
		d.Requeue, d.Outcome = p.Wait, OutcomeWaiting
		return d
	}
	switch {
	case p.Reloads():
		switch {
		case f.Gate.Hold.Reason != "":
			d.Hold = f.Gate.Hold
			d.GiveBack = true
		case f.Gate.Notify:
			// Nothing rolls, so nothing is paced: the record advances now.
			d.Notified, d.WriteRecord, d.GiveBack = p.Changes, p.WriteRecord, true
			d.Pause = f.pause(false)
			d.Requeue = d.Pause.Requeue
			return d
		case f.RateWait == nil:
			d.AskRate = true
			return d
		case *f.RateWait > 0:
			d.Hold.Reason, d.Hold.Until, d.Hold.Why = HoldRateLimit, f.Now.Add(*f.RateWait), f.Rate
		}
	case p.WriteRecord && !f.Recorded:
		switch {
		case f.FirstSightWait == nil:
			d.AskFirstSight = true
			return d
		case *f.FirstSightWait > 0:
			d.Requeue, d.Outcome = *f.FirstSightWait, OutcomeWaiting
			return d
		}
	default:
		d.GiveBack = true
	}
	held := d.Hold.Reason != ""
	d.WriteRecord = p.WriteRecord && !held
	rolls := p.Reloads() && !held && !f.Unrolled
	if rolls {
		d.Reload = p.Changes
	}
	d.Pause = f.pause(rolls)
	d.Requeue = d.Pause.Requeue
	if held {
		// The sooner of the hold's end and the pause's; a hold without end (an approval)
		// ends on an event.
		if wait := d.Hold.Until.Sub(f.Now); !d.Hold.Until.IsZero() && (d.Requeue <= 0 || wait < d.Requeue) {
			d.Requeue = wait
		}
		d.Outcome = OutcomeHeld
	}
	return d
}

func (f Facts) pause(reloading bool) PauseStep {
	if f.Pause == nil {
		return PauseStep{}
	}
	return PlanPause(f.Keys, *f.Pause, reloading, f.Now)
}
