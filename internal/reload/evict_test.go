package reload

import (
	"strings"
	"testing"
	"time"
)

func TestParseRestartStrategy(t *testing.T) {
	for _, tc := range []struct {
		v         string
		evict, ok bool
	}{{"", false, true}, {"rollout", false, true}, {" evict ", true, true}, {"Evict", false, false}, {"delete-pods", false, false}} {
		evict, err := ParseRestartStrategy(tc.v)
		if evict != tc.evict || (err == nil) != tc.ok {
			t.Errorf("%q: evict %v, err %v; want %v, ok %v", tc.v, evict, err, tc.evict, tc.ok)
		}
	}
}

func TestEvictingRoundTripAndBounds(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 600e6, time.UTC)
	e := StartEvicting(now, Record{"configmap/a": "h1"})
	if want := time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC); !e.Since.Equal(want) {
		t.Errorf("since %s, want the next whole second %s", e.Since, want)
	}
	if e.Record != RecordDigest(Record{"configmap/a": "h1"}.Encode()) {
		t.Errorf("record digest %s", e.Record)
	}
	back, err := ParseEvicting(e.Encode(), now)
	if err != nil || back != e {
		t.Fatalf("round trip: %v, %+v want %+v", err, back, e)
	}
	for name, v := range map[string]string{
		"not JSON":   "evict everything",
		"too large":  `{"since":"2026-01-02T03:04:06Z","record":"` + strings.Repeat("a", 300) + `"}`,
		"no time":    `{"record":"0123456789abcdef"}`,
		"future":     `{"since":"2026-01-02T03:05:00Z","record":"0123456789abcdef"}`,
		"bad digest": `{"since":"2026-01-02T03:04:06Z","record":"xyz"}`,
	} {
		if _, err := ParseEvicting(v, now); err == nil {
			t.Errorf("%s: accepted %s", name, v)
		}
	}
}

func TestPlanEviction(t *testing.T) {
	since := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	e := Evicting{Since: since}
	before, after := since.Add(-time.Minute), since.Add(time.Second)
	now := since.Add(time.Minute)
	pod := func(name string, created time.Time, ready, term bool) EvictPod {
		return EvictPod{Name: name, Created: created, Ready: ready, Terminating: term}
	}
	for _, tc := range []struct {
		name    string
		pods    []EvictPod
		desired int32
		now     time.Time
		want    EvictStep
	}{
		{"oldest first", []EvictPod{pod("b", before, true, false), pod("a", before.Add(-time.Second), true, false), pod("c", after, true, false)}, 3, now,
			EvictStep{Evict: "a", Left: 2}},
		{"replacement not ready", []EvictPod{pod("b", before, true, false), pod("c", after, false, false)}, 2, now,
			EvictStep{Wait: EvictPoll, Left: 1, Why: "1 of 2 pods ready"}},
		{"replacement not created yet", []EvictPod{pod("b", before, true, false)}, 2, now,
			EvictStep{Wait: EvictPoll, Left: 1, Why: "1 of 2 pods ready"}},
		{"one terminating", []EvictPod{pod("a", before, true, true), pod("b", before, true, false), pod("c", after, true, false)}, 2, now,
			EvictStep{Wait: EvictPoll, Left: 1, Why: "pod a is terminating"}},
		{"before since", []EvictPod{pod("a", before, true, false)}, 1, since.Add(-300 * time.Millisecond),
			EvictStep{Wait: 300 * time.Millisecond, Left: 1, Why: "the restart starts at 2026-01-01T00:00:10Z"}},
		{"done", []EvictPod{pod("c", after, true, false), pod("d", since, false, false)}, 2, now, EvictStep{Done: true}},
		{"done, old one still terminating", []EvictPod{pod("a", before, true, true), pod("c", after, true, false)}, 1, now, EvictStep{Done: true}},
		{"no pods", nil, 0, now, EvictStep{Done: true}},
	} {
		if got := PlanEviction(e, tc.pods, tc.desired, tc.now); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func FuzzParseEvicting(f *testing.F) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f.Add(StartEvicting(now, Record{"configmap/a": "h"}).Encode())
	f.Add(`{"since":"9999-01-01T00:00:00Z","record":"0123456789abcdef"}`)
	f.Fuzz(func(t *testing.T, v string) {
		e, err := ParseEvicting(v, now)
		if err != nil {
			return
		}
		if e.Since.After(now.Add(MaxEvictLead)) || len(e.Record) != 16 {
			t.Errorf("accepted out of bounds: %+v", e)
		}
	})
}
