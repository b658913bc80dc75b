package reload

import (
	"strings"
	"testing"
	"time"

	"github.com/reloader-operator/reloader/internal/testutil"
)

func TestReloadWindowsNext(t *testing.T) {
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339, s)
		testutil.Must(t, err)
		return v
	}
	tests := []struct {
		name, windows, now, want string
	}{
		// 2026-11-23 is a Monday.
		{"inside a weekday window", "Mon-Fri 02:00-04:00 UTC", "2026-11-23T03:00:00Z", "2026-11-23T03:00:00Z"},
		{"the start is inside", "Mon-Fri 02:00-04:00 UTC", "2026-11-23T02:00:00Z", "2026-11-23T02:00:00Z"},
		{"the end is outside", "Mon-Fri 02:00-04:00 UTC", "2026-11-23T04:00:00Z", "2026-11-24T02:00:00Z"},
		{"Friday evening waits for Monday", "Mon-Fri 02:00-04:00 UTC", "2026-11-27T05:00:00Z", "2026-11-30T02:00:00Z"},
		{"in the zone's wall clock", "Mon-Fri 02:00-04:00 Europe/Berlin", "2026-11-22T12:00:00Z", "2026-11-23T01:00:00Z"},
		{"crossing midnight, after midnight", "Sat,Sun 22:00-02:00 UTC", "2026-11-23T01:30:00Z", "2026-11-23T01:30:00Z"},
		{"crossing midnight ends the next day", "Sat,Sun 22:00-02:00 UTC", "2026-11-23T02:00:00Z", "2026-11-28T22:00:00Z"},
		{"daily in New York (EST)", "daily 01:00-03:00 America/New_York", "2026-11-23T09:00:00Z", "2026-11-24T06:00:00Z"},
		{"daily in New York (EDT)", "daily 01:00-03:00 America/New_York", "2026-07-01T09:00:00Z", "2026-07-02T05:00:00Z"},
		{"the earliest of several", "Sat 10:00-11:00 UTC; Tue 10:00-11:00 UTC", "2026-11-23T12:00:00Z", "2026-11-24T10:00:00Z"},
		{"a range wrapping the week", "Fri-Mon 10:00-11:00 UTC", "2026-11-24T12:00:00Z", "2026-11-27T10:00:00Z"},
		{"a whole day", "Wed 00:00-24:00 UTC", "2026-11-25T23:59:59Z", "2026-11-25T23:59:59Z"},
		// Berlin springs forward on 2026-03-29 at 02:00 CET to 03:00 CEST: the hour does not
		// exist, and the window does not open that day.
		{"a window swallowed by spring forward", "Sun 02:00-03:00 Europe/Berlin", "2026-03-28T12:00:00Z", "2026-04-05T00:00:00Z"},
		{"a window across spring forward is shorter", "Sun 01:00-04:00 Europe/Berlin", "2026-03-29T01:30:00Z", "2026-03-29T01:30:00Z"},
		{"after it, still closed", "Sun 01:00-04:00 Europe/Berlin", "2026-03-29T02:00:00Z", "2026-04-04T23:00:00Z"},
		// Falls back on 2026-10-25 at 03:00 CEST to 02:00 CET: 02:00-03:00 happens twice, and
		// the window is open once, an hour long, the second time (time.Date's choice).
		{"fall back, first 02:30", "Sun 02:00-03:00 Europe/Berlin", "2026-10-25T00:30:00Z", "2026-10-25T01:00:00Z"},
		{"fall back, second 02:30", "Sun 02:00-03:00 Europe/Berlin", "2026-10-25T01:30:00Z", "2026-10-25T01:30:00Z"},
		{"fall back, after", "Sun 02:00-03:00 Europe/Berlin", "2026-10-25T02:00:00Z", "2026-11-01T01:00:00Z"},
		{"case and spaces are free", "  mon-FRI   02:00-04:00   UTC ;", "2026-11-23T05:00:00Z", "2026-11-24T02:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, err := ParseReloadWindows(tt.windows)
			testutil.Must(t, err)
			got, ok := ws.Next(at(tt.now))
			if !ok || !got.Equal(at(tt.want)) {
				t.Errorf("Next(%s) = %s, %v; want %s", tt.now, got.UTC().Format(time.RFC3339), ok, tt.want)
			}
		})
	}
}

func TestParseReloadWindowsRejects(t *testing.T) {
	for _, v := range []string{
		"", ";", "daily", "Mon-Fri 02:00-04:00", "Mon-Fri 02:00-04:00 UTC extra",
		"Mo 02:00-04:00 UTC", "Mon- 02:00-04:00 UTC", "Mon-Fri 2:00-04:00 UTC", "Mon 02:00 UTC",
		"Mon 24:00-02:00 UTC", "Mon 02:60-03:00 UTC", "Mon 02:00-24:01 UTC", "Mon 02:00-02:00 UTC",
		"Mon 02:00-03:00 Mars/Olympus", "Mon 02:00-03:00 Local", "Mon 02:00-03:00 ../../etc/passwd",
		"Mon -1:00-03:00 UTC", "Mon +1:00-03:00 UTC",
		strings.Repeat("Mon 02:00-03:00 UTC;", 17),
		"Mon 02:00-03:00 UTC" + strings.Repeat(" ", MaxReloadWindowLen),
	} {
		if _, err := ParseReloadWindows(v); err == nil {
			t.Errorf("ParseReloadWindows(%q) accepted", v)
		}
	}
}

func TestPlanHold(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC) // a Monday
	tests := []struct {
		name        string
		s           HoldState
		reason      string
		until       time.Time
		minInterval time.Duration
		invalid     int
	}{
		{name: "nothing set: no hold"},
		{name: "flag interval, no last reload: no hold", s: HoldState{DefaultMinInterval: time.Hour}, minInterval: time.Hour},
		{name: "within the flag's interval", s: HoldState{DefaultMinInterval: time.Hour, LastReload: "2026-11-23T09:30:00Z", HasLastReload: true},
			reason: HoldMinInterval, until: now.Add(30 * time.Minute), minInterval: time.Hour},
		{name: "past the interval", s: HoldState{DefaultMinInterval: time.Hour, LastReload: "2026-11-23T09:00:00Z", HasLastReload: true}, minInterval: time.Hour},
		{name: "the annotation wins over the flag", s: HoldState{DefaultMinInterval: time.Hour, MinInterval: "10m", HasMinInterval: true, LastReload: "2026-11-23T09:55:00Z", HasLastReload: true},
			reason: HoldMinInterval, until: now.Add(5 * time.Minute), minInterval: 10 * time.Minute},
		{name: "annotation 0 turns the flag off", s: HoldState{DefaultMinInterval: time.Hour, MinInterval: "0s", HasMinInterval: true, LastReload: "2026-11-23T09:55:00Z", HasLastReload: true}},
		{name: "an invalid interval falls back to the flag", s: HoldState{DefaultMinInterval: time.Hour, MinInterval: "soon", HasMinInterval: true, LastReload: "2026-11-23T09:30:00Z", HasLastReload: true},
			reason: HoldMinInterval, until: now.Add(30 * time.Minute), minInterval: time.Hour, invalid: 1},
		{name: "an interval past 7 days is invalid", s: HoldState{MinInterval: "169h", HasMinInterval: true, LastReload: "2026-11-23T09:30:00Z", HasLastReload: true}, invalid: 1},
		{name: "an unreadable last reload holds nothing", s: HoldState{DefaultMinInterval: time.Hour, LastReload: "yesterday", HasLastReload: true}, minInterval: time.Hour},
		{name: "window open", s: HoldState{Window: "Mon 09:00-11:00 UTC", HasWindow: true}},
		{name: "window closed", s: HoldState{Window: "Mon 11:00-12:00 UTC", HasWindow: true}, reason: HoldReloadWindow, until: now.Add(time.Hour)},
		{name: "interval ends inside the window", s: HoldState{Window: "Mon 09:00-11:00 UTC", HasWindow: true, MinInterval: "1h", HasMinInterval: true, LastReload: "2026-11-23T09:30:00Z", HasLastReload: true},
			reason: HoldMinInterval, until: now.Add(30 * time.Minute), minInterval: time.Hour},
		{name: "interval ends after the window: next opening", s: HoldState{Window: "Mon 09:00-10:15 UTC", HasWindow: true, MinInterval: "1h", HasMinInterval: true, LastReload: "2026-11-23T09:30:00Z", HasLastReload: true},
			reason: HoldReloadWindow, until: now.Add(7*24*time.Hour - time.Hour), minInterval: time.Hour},
		{name: "an invalid window holds nothing", s: HoldState{Window: "Mon 25:00-26:00 UTC", HasWindow: true}, invalid: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := PlanHold(tt.s, now)
			if h.Reason != tt.reason || !h.Until.Equal(tt.until) || h.MinInterval != tt.minInterval || len(h.Invalid) != tt.invalid {
				t.Errorf("PlanHold = %q until %v, interval %v, invalid %v; want %q until %v, interval %v, %d invalid",
					h.Reason, h.Until, h.MinInterval, h.Invalid, tt.reason, tt.until, tt.minInterval, tt.invalid)
			}
			if (h.Reason == "") != (h.Why == "") {
				t.Errorf("reason %q with why %q", h.Reason, h.Why)
			}
		})
	}
	h := PlanHold(HoldState{Window: "Mon 25:00-26:00 UTC", HasWindow: true}, now)
	if msg := h.Invalid[0].Error(); !strings.Contains(msg, ReloadWindowAnnotation) || !strings.Contains(msg, "HH:MM-HH:MM") {
		t.Errorf("the error names neither the annotation nor the form: %s", msg)
	}
}

// FuzzParseReloadWindows checks that any value parses within its bounds, without a panic,
// and that the windows it yields answer Next with a time not before the question, open in a
// week.
func FuzzParseReloadWindows(f *testing.F) {
	for _, seed := range []string{
		"Mon-Fri 02:00-04:00 Europe/Berlin", "Sat,Sun 22:00-02:00 UTC", "daily 01:00-03:00 America/New_York",
		"Sun 02:00-03:00 Europe/Berlin; Fri-Mon 23:59-00:00 Asia/Kolkata", "Wed 00:00-24:00 UTC", "mon 1:00-2:00 utc",
		"\x00 \xff-é ;;", strings.Repeat("Mon,", 200) + " 01:00-02:00 UTC",
	} {
		f.Add(seed, int64(1795000000))
	}
	f.Fuzz(func(t *testing.T, v string, unix int64) {
		ws, err := ParseReloadWindows(v)
		if err != nil {
			return
		}
		if len(v) > MaxReloadWindowLen || len(ws) > MaxReloadWindows || len(ws) == 0 {
			t.Fatalf("past the bounds: %d characters, %d windows", len(v), len(ws))
		}
		now := time.Unix(unix%(1<<33), 0)
		next, ok := ws.Next(now)
		if !ok {
			return // only windows every daylight-saving jump swallows never open
		}
		if next.Before(now) || next.Sub(now) > 9*24*time.Hour {
			t.Fatalf("Next(%v) = %v", now, next)
		}
	})
}

// BenchmarkPlanHold is the cost a reconcile pays for pacing: both annotations parsed anew.
func BenchmarkPlanHold(b *testing.B) {
	s := HoldState{Window: "Mon-Fri 02:00-04:00 Europe/Berlin; Sat,Sun 22:00-02:00 UTC", HasWindow: true,
		MinInterval: "10m", HasMinInterval: true, LastReload: "2026-11-23T09:55:00Z", HasLastReload: true}
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	for b.Loop() {
		if h := PlanHold(s, now); h.Reason == "" {
			b.Fatal("not held")
		}
	}
}
