package window_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/reloader-operator/reloader/internal/gate"
	"github.com/reloader-operator/reloader/internal/gate/gatetest"
	"github.com/reloader-operator/reloader/internal/gate/window"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
)

func check(t *testing.T, g window.Gate, d gate.Due) gate.Verdict {
	t.Helper()
	v, err := g.Check(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestWindowGate(t *testing.T) {
	clock := gatetest.NewClock() // 2026-03-02 10:00 UTC, a Monday
	now := clock.Now()
	last := now.Add(-10 * time.Minute).Format(time.RFC3339)
	hour := time.Hour
	due := func(ann map[string]string) *gatetest.Builder {
		return gatetest.For("ns", "web", ann).Changed(source.ConfigMap, "cfg", "h2", nil).At(now)
	}
	stamp := now.Format(time.RFC3339)
	tests := []struct {
		name    string
		g       window.Gate
		d       gate.Due
		reason  string
		until   time.Time
		stamp   bool
		invalid int
	}{
		{name: "nothing set: the reload goes, unstamped", d: due(nil).Due()},
		{name: "the flag's interval, no last reload: goes, stamped", g: window.Gate{MinInterval: time.Hour}, d: due(nil).Due(), stamp: true},
		{name: "the flag's interval since the last reload: held until it has passed",
			g: window.Gate{MinInterval: time.Hour}, d: due(map[string]string{reload.LastReloadAnnotation: last}).Due(),
			reason: reload.HoldMinInterval, until: now.Add(50 * time.Minute)},
		{name: "the annotation's interval wins over the flag's",
			g: window.Gate{MinInterval: time.Hour}, d: due(map[string]string{reload.LastReloadAnnotation: last, reload.MinReloadIntervalAnnotation: "5m"}).Due(), stamp: true},
		{name: "a ReloaderConfig's interval where the annotation sets none",
			d:      due(map[string]string{reload.LastReloadAnnotation: last}).Overrides(reload.Overrides{MinReloadInterval: &hour}).Due(),
			reason: reload.HoldMinInterval, until: now.Add(50 * time.Minute)},
		{name: "a shut window: held until it opens",
			d: due(map[string]string{reload.ReloadWindowAnnotation: "daily 03:00-04:00 UTC"}).Due(), reason: reload.HoldReloadWindow,
			until: time.Date(2026, 3, 3, 3, 0, 0, 0, time.UTC)},
		{name: "a ReloaderConfig's window", d: due(nil).Overrides(reload.Overrides{ReloadWindow: "daily 03:00-04:00 UTC"}).Due(),
			reason: reload.HoldReloadWindow, until: time.Date(2026, 3, 3, 3, 0, 0, 0, time.UTC)},
		{name: "an open window: goes", d: due(map[string]string{reload.ReloadWindowAnnotation: "daily 09:00-11:00 UTC"}).Due()},
		{name: "an unreadable window: reported, and the reload goes",
			d: due(map[string]string{reload.ReloadWindowAnnotation: "weekdays 3am-4am"}).Due(), invalid: 1},
		{name: "an unreadable interval: reported, the flag's applies",
			g: window.Gate{MinInterval: time.Hour}, d: due(map[string]string{reload.LastReloadAnnotation: last, reload.MinReloadIntervalAnnotation: "often"}).Due(),
			reason: reload.HoldMinInterval, until: now.Add(50 * time.Minute), invalid: 1},
		{name: "nothing due: nothing held, nothing stamped",
			g: window.Gate{MinInterval: time.Hour}, d: gatetest.For("ns", "web", map[string]string{reload.LastReloadAnnotation: last}).At(now).Due()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := check(t, tt.g, tt.d)
			if v.Hold.Reason != tt.reason || !v.Hold.Until.Equal(tt.until) {
				t.Errorf("hold = %q until %v; want %q until %v", v.Hold.Reason, v.Hold.Until, tt.reason, tt.until)
			}
			if got := v.Spend[reload.LastReloadAnnotation]; (got != nil) != tt.stamp || (got != nil && *got != stamp) {
				t.Errorf("spend = %v; want a stamp: %v", v.Spend, tt.stamp)
			}
			if len(v.Invalid) != tt.invalid {
				t.Errorf("invalid = %v; want %d", v.Invalid, tt.invalid)
			}
			if tt.reason != "" {
				if len(v.Notices) != 1 || v.Notices[0].Held != tt.reason || v.Notices[0].Once == "" || !strings.Contains(v.Notices[0].Message, "web") {
					t.Errorf("notices = %+v; want one announcing the hold, once", v.Notices)
				}
			} else if len(v.Notices) != 0 {
				t.Errorf("notices = %+v; want none", v.Notices)
			}
		})
	}
}

// Behind an earlier gate's hold the window says nothing; behind a notice it holds nothing
// (nothing rolls) but still reports an unreadable annotation.
func TestWindowGateBehindOthers(t *testing.T) {
	d := gatetest.For("ns", "web", map[string]string{reload.ReloadWindowAnnotation: "daily 03:00-04:00 UTC", reload.MinReloadIntervalAnnotation: "often"}).
		Changed(source.ConfigMap, "cfg", "h2", nil).Due()
	d.Ahead = &gate.Held{Gate: "quarantine", Hold: reload.Hold{Reason: "quarantine"}}
	if v := check(t, window.Gate{}, d); v.Hold.Reason != "" || len(v.Notices)+len(v.Invalid)+len(v.Spend) != 0 {
		t.Errorf("behind a hold: %+v; want nothing", v)
	}
	d.Ahead, d.Notify = nil, true
	if v := check(t, window.Gate{}, d); v.Hold.Reason != "" || len(v.Notices) != 0 || len(v.Invalid) != 1 {
		t.Errorf("behind a notice: %+v; want no hold, the unreadable interval reported", v)
	}
}

// The same hold is announced with the same Once value on every requeue, a moved one anew.
func TestWindowGateAnnouncesEachHoldOnce(t *testing.T) {
	clock := gatetest.NewClock()
	b := gatetest.For("ns", "web", map[string]string{reload.ReloadWindowAnnotation: "daily 03:00-04:00 UTC"}).Changed(source.ConfigMap, "cfg", "h2", nil)
	first := check(t, window.Gate{}, b.At(clock.Now()).Due())
	clock.Step(time.Minute)
	again := check(t, window.Gate{}, b.At(clock.Now()).Due())
	if first.Notices[0].Once != again.Notices[0].Once {
		t.Errorf("the same hold: Once %q, then %q", first.Notices[0].Once, again.Notices[0].Once)
	}
	clock.Step(24 * time.Hour)
	moved := check(t, window.Gate{}, b.At(clock.Now()).Due())
	if moved.Notices[0].Once == first.Notices[0].Once {
		t.Errorf("a hold to the next day's window kept Once %q", moved.Notices[0].Once)
	}
}
