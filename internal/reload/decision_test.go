package reload

import (
	"reflect"
	"testing"
	"time"

	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/source"
)

func TestDecisionOutcomesAreTheMetricsLabels(t *testing.T) {
	if OutcomeWaiting != metrics.OutcomeWaiting || OutcomeHeld != metrics.OutcomeHeld {
		t.Errorf("reload's outcomes %q, %q differ from metrics' %q, %q", OutcomeWaiting, OutcomeHeld, metrics.OutcomeWaiting, metrics.OutcomeHeld)
	}
}

func TestDecide(t *testing.T) {
	now := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	cfg := source.ID{Kind: source.ConfigMap, Name: "cfg"}
	app := []string{"app"}
	change := []Change{{ID: cfg, Hash: "h2", Containers: app}}
	changed := Input{Sources: map[source.ID]Observed{cfg: {Hash: "h2", Containers: app}}, Record: Record{"configmap/cfg": "h1"}, HasRecord: true}
	unchanged := Input{Sources: map[source.ID]Observed{cfg: {Hash: "h1", Containers: app}}, Record: Record{"configmap/cfg": "h1"}, HasRecord: true}
	first := Input{Sources: map[source.ID]Observed{cfg: {Hash: "h1", Containers: app}}}
	waiting := changed
	waiting.Wait = 3 * time.Second
	dur := func(d time.Duration) *time.Duration { return &d }
	keys := DefaultKeys()
	period := &PauseState{Period: "5m", HasPeriod: true}
	pausedAt := now.Add(-time.Minute).Format(time.RFC3339)
	paused := &PauseState{Paused: true, PausedAt: pausedAt, HasPausedAt: true, Period: "5m", HasPeriod: true}
	windowed := Gated{Hold: Hold{Reason: HoldReloadWindow, Until: now.Add(17 * time.Hour), Why: "reload window daily 03:00-04:00 UTC"}}
	quarantined := Gated{Hold: Hold{Reason: "quarantine", Until: now.Add(5 * time.Minute)}}
	approval := Gated{Hold: Hold{Reason: HoldApproval}}
	tests := []struct {
		name string
		f    Facts
		// want is compared field by field but for Plan (MakePlan's own table tests it) and
		// Hold.Why.
		want Decision
	}{{
		name: "a due reload asks the rate limiter first",
		f:    Facts{Input: changed, Recorded: true, Now: now},
		want: Decision{AskRate: true},
	}, {
		name: "a slot now: the reload is written with its record",
		f:    Facts{Input: changed, Recorded: true, Now: now, RateWait: dur(0)},
		want: Decision{Reload: change, WriteRecord: true},
	}, {
		name: "no slot yet: held by the rate limit, nothing written, back when the slot comes",
		f:    Facts{Input: changed, Recorded: true, Now: now, RateWait: dur(2 * time.Second), Rate: "rate limit 1 reloads/s"},
		want: Decision{Hold: Hold{Reason: HoldRateLimit, Until: now.Add(2 * time.Second)}, Requeue: 2 * time.Second, Outcome: OutcomeHeld},
	}, {
		name: "held by a gate (its own reload window): the slot goes back, and the limiter is not asked",
		f:    Facts{Input: changed, Recorded: true, Now: now, Gate: windowed},
		want: Decision{Hold: windowed.Hold, GiveBack: true, Requeue: 17 * time.Hour, Outcome: OutcomeHeld},
	}, {
		name: "held by a gate (the flap breaker): the slot goes back, nothing written",
		f:    Facts{Input: changed, Recorded: true, Now: now, Gate: quarantined},
		want: Decision{Hold: quarantined.Hold, GiveBack: true, Requeue: 5 * time.Minute, Outcome: OutcomeHeld},
	}, {
		name: "a gate's hold holds nothing when nothing is due",
		f:    Facts{Input: unchanged, Recorded: true, Now: now, Gate: quarantined},
		want: Decision{GiveBack: true, WriteRecord: true},
	}, {
		name: "a hold without end (approval): back on the next event, nothing written",
		f:    Facts{Input: changed, Recorded: true, Now: now, Gate: approval},
		want: Decision{Hold: approval.Hold, GiveBack: true, Outcome: OutcomeHeld},
	}, {
		name: "a hold without end while a pause stands comes back when the pause ends",
		f:    Facts{Input: changed, Recorded: true, Now: now, Pause: paused, Keys: keys, Gate: approval},
		want: Decision{Hold: approval.Hold, GiveBack: true, Pause: PauseStep{Requeue: 4 * time.Minute}, Requeue: 4 * time.Minute, Outcome: OutcomeHeld},
	}, {
		name: "notify: nothing rolls, nothing is paced or asked, the record advances",
		f:    Facts{Input: changed, Recorded: true, Now: now, Gate: Gated{Notify: true}},
		want: Decision{Notified: change, WriteRecord: true, GiveBack: true},
	}, {
		name: "notify starts no pause",
		f:    Facts{Input: changed, Recorded: true, Now: now, Pause: period, Keys: keys, Gate: Gated{Notify: true}},
		want: Decision{Notified: change, WriteRecord: true, GiveBack: true},
	}, {
		name: "notify with nothing due notifies nothing",
		f:    Facts{Input: unchanged, Recorded: true, Now: now, Gate: Gated{Notify: true}},
		want: Decision{GiveBack: true, WriteRecord: true},
	}, {
		name: "a hold goes before a notice",
		f:    Facts{Input: changed, Recorded: true, Now: now, Gate: Gated{Hold: quarantined.Hold, Notify: true}},
		want: Decision{Hold: quarantined.Hold, GiveBack: true, Requeue: 5 * time.Minute, Outcome: OutcomeHeld},
	}, {
		name: "the coalescing window: wait, nothing else",
		f:    Facts{Input: waiting, Recorded: true, Now: now, Gate: windowed},
		want: Decision{Requeue: 3 * time.Second, Outcome: OutcomeWaiting},
	}, {
		name: "nothing due: the record is kept and any slot goes back",
		f:    Facts{Input: unchanged, Recorded: true, Now: now},
		want: Decision{GiveBack: true, WriteRecord: true},
	}, {
		name: "a first record asks the pacer for its turn",
		f:    Facts{Input: first, Now: now},
		want: Decision{AskFirstSight: true},
	}, {
		name: "a first record waits its turn",
		f:    Facts{Input: first, Now: now, FirstSightWait: dur(time.Second)},
		want: Decision{Requeue: time.Second, Outcome: OutcomeWaiting},
	}, {
		name: "a first record in its turn is written",
		f:    Facts{Input: first, Now: now, FirstSightWait: dur(0)},
		want: Decision{WriteRecord: true},
	}, {
		name: "an unreadable record counts as none, but is no first sighting to pace",
		f:    Facts{Input: first, Recorded: true, Now: now},
		want: Decision{GiveBack: true, WriteRecord: true},
	}, {
		name: "a reload of a kind with a pause period pauses it",
		f:    Facts{Input: changed, Recorded: true, Now: now, RateWait: dur(0), Pause: period, Keys: keys},
		want: Decision{Reload: change, WriteRecord: true, Pause: PauseStep{Pause: true, PausedAt: now.Format(time.RFC3339), Requeue: 5 * time.Minute}, Requeue: 5 * time.Minute},
	}, {
		name: "a held reload starts no pause",
		f:    Facts{Input: changed, Recorded: true, Now: now, RateWait: dur(time.Minute), Pause: period, Keys: keys},
		want: Decision{Hold: Hold{Reason: HoldRateLimit, Until: now.Add(time.Minute)}, Requeue: time.Minute, Outcome: OutcomeHeld},
	}, {
		name: "changes the template already holds roll nothing, and start no pause",
		f:    Facts{Input: changed, Recorded: true, Now: now, RateWait: dur(0), Pause: period, Keys: keys, Unrolled: true},
		want: Decision{WriteRecord: true},
	}, {
		name: "a hold comes back at the sooner of its end and the pause's",
		f:    Facts{Input: changed, Recorded: true, Now: now, RateWait: dur(time.Hour), Pause: paused, Keys: keys},
		want: Decision{Hold: Hold{Reason: HoldRateLimit, Until: now.Add(time.Hour)}, Pause: PauseStep{Requeue: 4 * time.Minute}, Requeue: 4 * time.Minute, Outcome: OutcomeHeld},
	}, {
		name: "while waiting, the pause that stands is told (explain shows it)",
		f:    Facts{Input: waiting, Recorded: true, Now: now, Pause: paused, Keys: keys},
		want: Decision{Pause: PauseStep{Requeue: 4 * time.Minute}, Requeue: 3 * time.Second, Outcome: OutcomeWaiting},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(tt.f)
			if !reflect.DeepEqual(got.Plan, MakePlan(tt.f.Input)) {
				t.Errorf("Plan = %+v; want MakePlan's %+v", got.Plan, MakePlan(tt.f.Input))
			}
			if tt.f.RateWait != nil && *tt.f.RateWait > 0 && got.Hold.Why != tt.f.Rate {
				t.Errorf("Hold.Why = %q; want the limiter, %q", got.Hold.Why, tt.f.Rate)
			}
			got.Plan, tt.want.Plan = Plan{}, Plan{}
			got.Hold.Why, tt.want.Hold.Why = "", ""
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Decide =\n %+v\nwant\n %+v", got, tt.want)
			}
		})
	}
}

// TestDecideAgainWithTheAnswer: the answers Decide asks for complete the same decision, and
// deciding again with them changes nothing (the pipeline decides again when the template
// already holds the changes).
func TestDecideAgainWithTheAnswer(t *testing.T) {
	now := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	cfg := source.ID{Kind: source.ConfigMap, Name: "cfg"}
	f := Facts{Input: Input{Sources: map[source.ID]Observed{cfg: {Hash: "h2"}}, Record: Record{"configmap/cfg": "h1"}, HasRecord: true},
		Recorded: true, Now: now}
	if d := Decide(f); !d.AskRate || d.Hold.Reason != "" {
		t.Fatalf("first decision: %+v; want AskRate", d)
	}
	wait := time.Duration(0)
	f.RateWait = &wait
	once, twice := Decide(f), Decide(f)
	if !reflect.DeepEqual(once, twice) || once.AskRate || len(once.Reload) != 1 {
		t.Errorf("decided with the answer: %+v, then %+v; want one reload, the same twice", once, twice)
	}
}
