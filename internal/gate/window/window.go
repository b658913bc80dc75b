// Package window is the gate of a workload's own pacing: the minimum interval since its last
// reload (the min-reload-interval annotation, a ReloaderConfig's minReloadInterval,
// --min-reload-interval), then its reload window (the reload-window annotation, or a
// ReloaderConfig's reloadWindow). reload.PlanHold decides; both are read from the target, so a
// restart or another replica holds until the same time.
package window

import (
	"context"
	"fmt"
	"time"

	"github.com/reloader-operator/reloader/internal/gate"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/report"
)

// Name is the gate's name in holds and explain.
const Name = "window"

// Gate holds a due reload until the target's minimum interval has passed and its reload
// window is open. It keeps no state.
type Gate struct {
	// MinInterval is --min-reload-interval: the interval where neither the target's
	// annotation nor a ReloaderConfig sets one.
	MinInterval time.Duration
	// Caches keep the time zones of windows loaded; nil: none.
	Caches *reload.Caches
}

// Name implements gate.Gate.
func (Gate) Name() string { return Name }

// Check implements gate.Gate: a hold while the interval runs or the window is shut, announced
// once per hold; when the reload goes under an interval, the time of this reload is written
// with it (reload.LastReloadAnnotation), for every replica to hold the next one from. An
// unreadable annotation is reported and left out. Behind an earlier gate's hold it says
// nothing: that hold is the one told.
func (g Gate) Check(_ context.Context, d gate.Due) (gate.Verdict, error) {
	if len(d.Changes) == 0 || d.Ahead != nil {
		return gate.Verdict{}, nil
	}
	s := reload.HoldStateOf(d.Target.GetAnnotations(), g.MinInterval, d.Overrides.MinReloadInterval, d.Overrides.ReloadWindow, g.Caches)
	h := reload.PlanHold(s, d.Now)
	v := gate.Verdict{Invalid: h.Invalid}
	h.Invalid = nil
	switch {
	case d.Notify:
		// Nothing rolls: nothing to pace.
	case h.Reason != "":
		v.Hold = h
		at := h.Until.UTC().Format(time.RFC3339)
		v.Notices = []gate.Notice{{Reason: report.ReasonReloadHeld, Action: "Hold", Held: h.Reason, Once: h.Reason + " " + at,
			Message: fmt.Sprintf("Reload of %s %s after change of %s held by %s; reloads at %s", d.Kind, d.Target.GetName(), report.Describe(d.Changes), h.Why, at)}}
	case h.MinInterval > 0:
		stamp := d.Now.UTC().Format(time.RFC3339)
		v.Spend = map[string]*string{reload.LastReloadAnnotation: &stamp}
	}
	return v, nil
}
