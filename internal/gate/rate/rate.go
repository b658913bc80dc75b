// Package rate is the step of the reload pipeline after the gates: a reload that no gate holds
// takes a slot of --reload-rate from the pacer (internal/pace), one pacer for every target
// kind, workloads and generic targets alike. It is not a gate of the chain: it is asked last,
// only for a reload that goes, and a slot it reserves is spent by that reload or given back.
package rate

import (
	"fmt"
	"time"

	"github.com/reloader-operator/reloader/internal/gate"
	"github.com/reloader-operator/reloader/internal/pace"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/report"
)

// Name names the rate step in holds and notices.
const Name = "rate"

// AnnounceAfter: a rate-limit hold shorter than this gets no Event (a log line at debug
// level): spreading a fan-out over a few seconds is routine, and one more Event per target
// would double the writes it spreads.
const AnnounceAfter = 5 * time.Second

// Wait is how long the reload of the target named key, in namespace ns, waits for its slot;
// 0: it goes now, the slot spent. Dry (explain), nothing is reserved: the wait of a slot
// already reserved, else 0.
func Wait(p *pace.Pacer, key, ns string, now time.Time, dry bool) time.Duration {
	if !dry {
		return p.Reload(key, ns, now)
	}
	if at, ok := p.Until(key, now); ok && at.After(now) {
		return at.Sub(now)
	}
	return 0
}

// Hold is the hold of a reload that waits wait for its slot; no hold when wait is 0.
func Hold(p *pace.Pacer, wait time.Duration, now time.Time) reload.Hold {
	if wait <= 0 {
		return reload.Hold{}
	}
	return reload.Hold{Reason: reload.HoldRateLimit, Until: now.Add(wait), Why: p.String()}
}

// Notice announces a rate-limit hold h of the reload of kind's target name after changes:
// once per slot, an Event only when the wait is long enough to be news. None when h is
// another hold.
func Notice(kind, name string, changes []reload.Change, h reload.Hold, now time.Time) []gate.Said {
	if h.Reason != reload.HoldRateLimit {
		return nil
	}
	at := h.Until.UTC().Format(time.RFC3339)
	return []gate.Said{{Gate: Name, Notice: gate.Notice{Reason: report.ReasonReloadHeld, Action: "Hold", Held: h.Reason,
		Once: at, Quiet: h.Until.Sub(now) < AnnounceAfter,
		Message: fmt.Sprintf("Reload of %s %s after change of %s held by %s; reloads at %s", kind, name, report.Describe(changes), h.Why, at)}}}
}
