package generic

import (
	"fmt"
	"strings"
	"time"

	"github.com/reloader-operator/reloader/internal/approval"
	"github.com/reloader-operator/reloader/internal/flap"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
)

// The guardrails of a due reload of a generic target, in the order reload.Decide applies them
// to a workload: the flap breaker's quarantine, the mode (notify reports and records, approve
// holds until approved), then the minimum interval and the reload window (reload.PlanHold);
// the pacer's rate slot is asked last, by the reconciler, as it reserves one. Each is decided
// by the same pure function the workload reconciler calls.

// gateIn is what the gates of one due reload read.
type gateIn struct {
	Now time.Time
	// Target is the target's annotations (mode, approval, interval, window, last reload).
	Target map[string]string
	// Due are the config's sources with their current hashes.
	Due []reload.Change
	// SourceAnn gives a due source's annotations (its mode).
	SourceAnn func(reload.Change) map[string]string
	// DefaultMode is the config's spec.mode, else --mode.
	DefaultMode approval.Mode
	// Quarantine holds the reload when a source is in quarantine; Reason empty: none.
	Quarantine reload.Hold
	// Hold is what PlanHold reads: the target's annotations, with the config's
	// minReloadInterval and reloadWindow where they set none.
	Hold reload.HoldState
	// ApproveTarget names the target in the approval hint.
	ApproveTarget string
}

// gateOut is what the gates make of it.
type gateOut struct {
	// Notify: mode notify; the record advances, the template is not written.
	Notify bool
	// Hold, when its Reason is set, holds the reload until Hold.Until (approval: until
	// approved).
	Hold reload.Hold
	// Approved: the approval annotation names this content; the write spends it.
	Approved bool
	// MinInterval in force; when positive the write stamps reload.LastReloadAnnotation.
	MinInterval time.Duration
	Invalid     []error
}

// planGates decides, purely, what the guardrails make of a due reload.
func planGates(in gateIn) gateOut {
	hold := reload.PlanHold(in.Hold, in.Now)
	out := gateOut{MinInterval: hold.MinInterval, Invalid: hold.Invalid}
	hold.Invalid = nil
	if in.Quarantine.Reason != "" {
		out.Hold = in.Quarantine
		return out
	}
	mode, bad := approval.Resolve(in.Target, in.Due, in.SourceAnn, in.DefaultMode)
	approved, has := in.Target[approval.ApprovedAnnotation]
	g := approval.Decide(mode, in.Due, approved, has, time.Time{}, in.ApproveTarget)
	out.Invalid = append(append(out.Invalid, bad...), g.Invalid...)
	switch {
	case g.Mode == approval.Notify:
		out.Notify = true
	case g.Hold != nil:
		out.Hold = *g.Hold
		// Not kubectl's target: the plugin approves workloads; the annotation is the same.
		out.Hold.Why = fmt.Sprintf("waiting for approval of %s; approve: kubectl annotate %s %s=%s", g.Digest, in.ApproveTarget, approval.ApprovedAnnotation, g.Digest)
	default:
		out.Approved = g.Approved
		out.Hold = hold
	}
	return out
}

// holdState reads what PlanHold needs from the target's annotations, the config's overrides
// and --min-reload-interval, as the workload reconciler's holdState does.
func holdState(ann map[string]string, o reload.Overrides, dflt time.Duration, caches *reload.Caches) reload.HoldState {
	return reload.HoldStateOf(ann, dflt, o.MinReloadInterval, o.ReloadWindow, caches)
}

// quarantine is the flap breaker's hold of a reload whose sources are in quarantine (the
// table the workload controllers feed, flap.go of internal/controller): until the latest end.
// A source's release annotation ends its quarantine, as for workloads.
func quarantine(t *flap.Table, ns string, due []reload.Change, sourceAnn func(reload.Change) map[string]string, now time.Time) (reload.Hold, []error) {
	var h reload.Hold
	var held []string
	var bad []error
	for _, ch := range due {
		key := flap.Key{Namespace: ns, Kind: string(ch.ID.Kind), Name: ch.ID.Name}
		if v, ok := sourceAnn(ch)[flap.ReleaseAnnotation]; ok {
			if at, err := flap.ParseRelease(v, now); err != nil {
				bad = append(bad, err)
			} else {
				t.Release(key, at, now)
			}
		}
		q, ok := t.Status(key, now)
		if !ok {
			continue
		}
		if h.Reason == "" || q.Until().After(h.Until) {
			h.Until = q.Until()
		}
		h.Reason = flap.HoldReason
		held = append(held, fmt.Sprintf("%s quarantined by the flap breaker since %s (%s)", ch.ID, q.Since.UTC().Format(time.RFC3339), q.What()))
	}
	h.Why = strings.Join(held, "; ")
	return h, bad
}

// defaultMode is the config's mode, else --mode, else reload.
func defaultMode(c *reloaderconfig.Compiled, flag approval.Mode) approval.Mode {
	switch {
	case c.Overrides.Mode != "":
		return approval.Mode(c.Overrides.Mode)
	case flag == "":
		return approval.Reload
	}
	return flag
}
