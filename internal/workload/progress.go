package workload

import (
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Progressing kinds roll their pods out over time after a pod template change and tell in
// their status how far they got. Kinds without it (Jobs, CronJobs) have no rollout to follow.
type Progressing interface {
	// Progress reads from obj's status how its rollout of generation gen, or a later one, is
	// going. It reads status only: the object is never written.
	Progress(obj client.Object, gen int64) Progress
}

// RolloutState is where a rollout stands.
type RolloutState int

// The states of a rollout.
const (
	// RolloutProgressing: new pods are on their way, or the controller has not seen the
	// change yet.
	RolloutProgressing RolloutState = iota
	// RolloutPaused: held back on purpose (a paused Deployment, an Argo Rollout at a pause
	// step); no deadline runs while paused.
	RolloutPaused
	// RolloutComplete: every desired replica runs the new template and is available.
	RolloutComplete
	// RolloutStalled: the kind's controller gave up (progress deadline exceeded, aborted).
	RolloutStalled
	// RolloutUntracked: nothing rolls on its own (update strategy OnDelete); not followed.
	RolloutUntracked
)

// Progress is how a rollout is going, as read from a workload's status.
type Progress struct {
	State RolloutState
	// Why tells a user how far it got, e.g. "1 of 3 replicas updated, 0 available". A change
	// of Why is progress: a deadline counts from the last one.
	Why string
	// Deadline is the kind's own limit on a rollout making no progress (a Deployment's
	// progressDeadlineSeconds), past which its controller reports the stall in a condition;
	// 0: the kind keeps none, the follower's deadline applies.
	Deadline time.Duration
}

// replicas are the counts every kind's status shows in some form.
type replicas struct {
	desired, updated, ready, available int32
	// current counts every pod or replica there is, old ones included; -1 when the kind
	// does not tell.
	current int32
}

// String says how far the counts are, as a user reads it.
func (c replicas) String() string {
	s := fmt.Sprintf("%d of %d replicas updated, %d ready, %d available", c.updated, c.desired, c.ready, c.available)
	if old := c.current - c.updated; c.current >= 0 && old > 0 {
		s += fmt.Sprintf(", %d old pending termination", old)
	}
	return s
}

// done reports whether every desired replica is updated and available and no old one is left.
func (c replicas) done() bool {
	return c.updated >= c.desired && c.available >= c.desired && c.ready >= c.desired &&
		(c.current < 0 || c.current <= c.updated)
}

// progress turns counts into a state, after the checks a kind makes first.
func (c replicas) progress() Progress {
	if c.done() {
		return Progress{State: RolloutComplete, Why: c.String()}
	}
	return Progress{State: RolloutProgressing, Why: c.String()}
}

// unobserved is the progress of a rollout whose controller has not seen generation gen yet.
func unobserved(observed, gen int64) Progress {
	return Progress{State: RolloutProgressing, Why: fmt.Sprintf("waiting for the controller to observe generation %d (observed %d)", gen, observed)}
}

// stalled says why a kind's controller gave up, after the counts.
func stalled(c replicas, reason, message string) Progress {
	why := c.String() + "; " + reason
	if message != "" {
		why += ": " + message
	}
	return Progress{State: RolloutStalled, Why: why}
}

// ReasonProgressDeadlineExceeded is the reason of the Progressing condition of a Deployment,
// an Argo Rollout or a DeploymentConfig whose rollout has made no progress in its deadline.
const ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"

func orOne(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}
