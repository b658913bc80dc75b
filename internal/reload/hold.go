package reload

import (
	"fmt"
	"strings"
	"time"
)

// Reasons a due reload waits, the values of reloader_reloads_waiting's reason label. PlanHold
// decides the first two; the controller's rate limiter the third.
const (
	HoldMinInterval  = "min-interval"
	HoldReloadWindow = "reload-window"
	HoldRateLimit    = "rate-limit"
	// HoldApproval: the reload waits until it is approved (internal/approval, mode approve).
	HoldApproval = "approval"
	// WaitCoalesce and WaitPause are the waits that came before pacing: the coalescing window,
	// and a Deployment paused by its pause period.
	WaitCoalesce = "coalesce"
	WaitPause    = "pause"
)

// MaxMinReloadInterval bounds the min-reload-interval annotation and flag.
const MaxMinReloadInterval = 7 * 24 * time.Hour

// HoldState is what a hold decision reads from a workload's annotations, as written.
type HoldState struct {
	LastReload     string
	HasLastReload  bool
	MinInterval    string
	HasMinInterval bool
	Window         string
	HasWindow      bool
	// DefaultMinInterval is --min-reload-interval.
	DefaultMinInterval time.Duration
	// Caches keep the time zones of windows loaded (the Policy's); nil: none.
	Caches *Caches
}

// HoldStateOf reads a HoldState from an object's annotations: dflt is --min-reload-interval,
// minInterval and window what a ReloaderConfig sets where the annotations set none (nil and
// "": nothing), caches the Policy's.
func HoldStateOf(ann map[string]string, dflt time.Duration, minInterval *time.Duration, window string, caches *Caches) HoldState {
	s := HoldState{DefaultMinInterval: dflt, Caches: caches}
	if minInterval != nil {
		s.DefaultMinInterval = *minInterval
	}
	s.LastReload, s.HasLastReload = ann[LastReloadAnnotation]
	s.MinInterval, s.HasMinInterval = ann[MinReloadIntervalAnnotation]
	s.Window, s.HasWindow = ann[ReloadWindowAnnotation]
	if !s.HasWindow && window != "" {
		s.Window, s.HasWindow = window, true
	}
	return s
}

// Hold is when a due reload may happen. Reason is empty when it may happen now.
type Hold struct {
	Reason string
	Until  time.Time
	// Why says, for Events and explain, what holds it ("reload window Mon-Fri 02:00-04:00 UTC").
	Why string
	// MinInterval is the interval in force; when positive, the reload writes
	// LastReloadAnnotation so that the next one is held from it, by any replica.
	MinInterval time.Duration
	// Invalid are annotations that could not be read; the reload goes on without them.
	Invalid []error
}

// PlanHold decides whether a reload that is due now waits: until the minimum interval since
// the last reload has passed, then until a reload window is open. Both are read from the
// workload, so a restart or another replica holds until the same time. A bad annotation is
// reported and left out (an invalid interval falls back to the flag's).
func PlanHold(s HoldState, now time.Time) Hold {
	h := Hold{MinInterval: s.DefaultMinInterval}
	if s.HasMinInterval {
		d, err := ParseMinReloadInterval(s.MinInterval)
		if err != nil {
			h.Invalid = append(h.Invalid, fmt.Errorf("annotation %s: %w; using %v", MinReloadIntervalAnnotation, err, s.DefaultMinInterval))
		} else {
			h.MinInterval = d
		}
	}
	until := now
	if h.MinInterval > 0 && s.HasLastReload {
		if last, err := time.Parse(time.RFC3339, s.LastReload); err == nil && last.Add(h.MinInterval).After(until) {
			until = last.Add(h.MinInterval)
			h.Reason = HoldMinInterval
			h.Why = fmt.Sprintf("minimum interval %v since the last reload at %s", h.MinInterval, last.UTC().Format(time.RFC3339))
		}
	}
	if s.HasWindow {
		ws, err := s.Caches.ParseReloadWindows(s.Window)
		switch {
		case err != nil:
			h.Invalid = append(h.Invalid, fmt.Errorf("annotation %s: %v; want %s; reloading without a window", ReloadWindowAnnotation, err, ReloadWindowForm))
		default:
			if opens, ok := ws.Next(until); ok && opens.After(until) {
				until = opens
				h.Reason = HoldReloadWindow
				h.Why = "reload window " + strings.Join(strings.Fields(s.Window), " ")
			}
		}
	}
	if h.Reason != "" {
		h.Until = until
	}
	return h
}

// ParseMinReloadInterval reads a minimum interval: a Go duration from 0 (none) to
// MaxMinReloadInterval.
func ParseMinReloadInterval(v string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d < 0 || d > MaxMinReloadInterval {
		return 0, fmt.Errorf("%q is not a duration from 0 to 168h, such as 10m", v)
	}
	return d, nil
}
