package reload

import (
	"fmt"
	"strings"
	"time"
)

// PauseState is what a pause decision reads from a Deployment.
type PauseState struct {
	// Paused is spec.paused.
	Paused bool
	// PausedAt is reloader's paused-at annotation; HasPausedAt is false when it is absent,
	// which makes a paused Deployment its user's.
	PausedAt    string
	HasPausedAt bool
	// Period is the pause-period annotation, if HasPeriod.
	Period    string
	HasPeriod bool
}

// PauseStep is what a reconcile does to a Deployment's pause.
type PauseStep struct {
	// Pause and Resume set spec.paused; PausedAt is written when Pause is set.
	Pause, Resume bool
	PausedAt      string
	// ClearPausedAt removes the paused-at annotation: the pause is over.
	ClearPausedAt bool
	// Requeue is when the pause ends.
	Requeue time.Duration
	// Invalid reports a pause period that is no positive duration; the reload goes on unpaused.
	Invalid error
}

// PlanPause runs the pause-period annotation. A reload pauses the Deployment in the same write
// that changes its template, so the changes of the whole period roll out once, at resume. The
// paused-at annotation on the object, not a timer, holds the state: a restart or a new leader
// resumes on time. A Deployment paused without paused-at was paused by its user and is never
// resumed here; resuming one by hand ends reloader's pause.
func PlanPause(keys Keys, s PauseState, reloading bool, now time.Time) PauseStep {
	if !s.HasPausedAt && (!reloading || s.Paused) {
		return PauseStep{}
	}
	var step PauseStep
	period, hasPeriod := time.Duration(0), false
	if s.HasPeriod {
		d, err := time.ParseDuration(strings.TrimSpace(s.Period))
		if err != nil || d <= 0 {
			step.Invalid = fmt.Errorf("annotation %s: %q is not a positive duration such as 5m; not pausing", keys.PausePeriod, s.Period)
		} else {
			period, hasPeriod = d, true
		}
	}
	switch {
	case s.HasPausedAt && !s.Paused:
		// Resumed by someone else: the pause is over.
		step.ClearPausedAt = true
	case s.HasPausedAt:
		t, err := time.Parse(time.RFC3339, s.PausedAt)
		if err == nil && hasPeriod && now.Before(t.Add(period)) {
			step.Requeue = t.Add(period).Sub(now)
			return step
		}
		step.Resume, step.ClearPausedAt = true, true
	case hasPeriod:
		step.Pause, step.PausedAt, step.Requeue = true, now.UTC().Format(time.RFC3339), period
	}
	return step
}

// PauseEnds is when a pause that began at pausedAt (the paused-at annotation) ends: after the
// workload's pause-period annotation (period, if hasPeriod), else after fallback (a
// ReloaderConfig's). ok is false when either can't be read, as PlanPause reads them.
func PauseEnds(pausedAt, period string, hasPeriod bool, fallback *time.Duration) (time.Time, bool) {
	at, err := time.Parse(time.RFC3339, pausedAt)
	if err != nil {
		return time.Time{}, false
	}
	var d time.Duration
	switch {
	case hasPeriod:
		if d, err = time.ParseDuration(strings.TrimSpace(period)); err != nil {
			return time.Time{}, false
		}
	case fallback != nil:
		d = *fallback
	}
	if d <= 0 {
		return time.Time{}, false
	}
	return at.Add(d), true
}
