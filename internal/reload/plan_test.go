package reload

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/reloader-operator/reloader/internal/source"
)

func TestMakePlan(t *testing.T) {
	cfg := source.ID{Kind: source.ConfigMap, Name: "cfg"}
	sec := source.ID{Kind: source.Secret, Name: "sec"}
	app := []string{"app"}
	now := func(h ...string) map[source.ID]Observed {
		m := map[source.ID]Observed{cfg: {Hash: h[0], Containers: app}}
		if len(h) > 1 {
			m[sec] = Observed{Hash: h[1], Containers: app}
		}
		return m
	}
	finished := Skip{Reason: "finished-job", Why: "the Job has finished"}
	tests := []struct {
		name string
		in   Input
		want Plan
	}{{
		name: "first sighting is only recorded",
		in:   Input{Sources: now("h1")},
		want: Plan{Record: Record{"configmap/cfg": "h1"}, WriteRecord: true},
	}, {
		name: "first sighting of a workload nothing concerns writes no record",
		in:   Input{},
		want: Plan{Record: Record{}},
	}, {
		name: "unchanged",
		in:   Input{Sources: now("h1"), Record: Record{"configmap/cfg": "h1"}, HasRecord: true},
		want: Plan{Record: Record{"configmap/cfg": "h1"}, WriteRecord: true},
	}, {
		name: "changed content reloads",
		in:   Input{Sources: now("h2"), Record: Record{"configmap/cfg": "h1"}, HasRecord: true},
		want: Plan{Changes: []Change{{ID: cfg, Hash: "h2", Containers: app}}, Record: Record{"configmap/cfg": "h2"}, WriteRecord: true},
	}, {
		name: "change since first seen reloads a workload without record",
		in:   Input{Sources: now("h2", "s1"), Baseline: Record{"configmap/cfg": "h1"}},
		want: Plan{Changes: []Change{{ID: cfg, Hash: "h2", Containers: app}}, Record: Record{"configmap/cfg": "h2", "secret/sec": "s1"}, WriteRecord: true},
	}, {
		name: "the record wins over a baseline",
		in:   Input{Sources: now("h2"), Record: Record{"configmap/cfg": "h2"}, HasRecord: true, Baseline: Record{"configmap/cfg": "h1"}},
		want: Plan{Record: Record{"configmap/cfg": "h2"}, WriteRecord: true},
	}, {
		name: "a change waits for the coalescing window",
		in:   Input{Sources: now("h2"), Record: Record{"configmap/cfg": "h1"}, HasRecord: true, Wait: time.Second},
		want: Plan{Wait: time.Second},
	}, {
		name: "no change never waits",
		in:   Input{Sources: now("h1"), Record: Record{"configmap/cfg": "h1"}, HasRecord: true, Wait: time.Second},
		want: Plan{Record: Record{"configmap/cfg": "h1"}, WriteRecord: true},
	}, {
		name: "a skipped reload is recorded",
		in:   Input{Sources: now("h2"), Record: Record{"configmap/cfg": "h1"}, HasRecord: true, Skip: finished},
		want: Plan{Skipped: []Change{{ID: cfg, Hash: "h2", Containers: app}}, Skip: finished, Record: Record{"configmap/cfg": "h2"}, WriteRecord: true},
	}, {
		name: "skip without a change is nothing",
		in:   Input{Sources: now("h1"), Record: Record{"configmap/cfg": "h1"}, HasRecord: true, Skip: finished},
		want: Plan{Record: Record{"configmap/cfg": "h1"}, WriteRecord: true},
	}, {
		name: "deletion reloads with --reload-on-delete",
		in:   Input{Sources: now(Absent), Record: Record{"configmap/cfg": "h1"}, HasRecord: true, Events: Events{OnDelete: true}},
		want: Plan{Changes: []Change{{ID: cfg, Hash: Absent, Containers: app}}, Record: Record{"configmap/cfg": Absent}, WriteRecord: true},
	}, {
		name: "deletion keeps the last hash without it",
		in:   Input{Sources: now(Absent), Record: Record{"configmap/cfg": "h1"}, HasRecord: true},
		want: Plan{Record: Record{"configmap/cfg": "h1"}, WriteRecord: true},
	}, {
		name: "deletion since first seen reloads with --reload-on-delete",
		in:   Input{Sources: now(Absent), Baseline: Record{"configmap/cfg": "h1"}, Events: Events{OnDelete: true}},
		want: Plan{Changes: []Change{{ID: cfg, Hash: Absent, Containers: app}}, Record: Record{"configmap/cfg": Absent}, WriteRecord: true},
	}, {
		name: "creation since first seen reloads with --reload-on-create",
		in:   Input{Sources: now("h1"), Baseline: Record{"configmap/cfg": Absent}, Events: Events{OnCreate: true}},
		want: Plan{Changes: []Change{{ID: cfg, Hash: "h1", Containers: app}}, Record: Record{"configmap/cfg": "h1"}, WriteRecord: true},
	}, {
		name: "changes come out in source order",
		in:   Input{Sources: now("h2", "s2"), Record: Record{"configmap/cfg": "h1", "secret/sec": "s1"}, HasRecord: true},
		want: Plan{Changes: []Change{{ID: cfg, Hash: "h2", Containers: app}, {ID: sec, Hash: "s2", Containers: app}},
			Record: Record{"configmap/cfg": "h2", "secret/sec": "s2"}, WriteRecord: true},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := MakePlan(tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("MakePlan =\n %+v\nwant\n %+v", got, tt.want)
			}
			if got.Reloads() != (len(tt.want.Changes) > 0) {
				t.Errorf("Reloads() = %v", got.Reloads())
			}
		})
	}
}

func TestPlanPause(t *testing.T) {
	keys := DefaultKeys()
	at := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	stamp := at.Format(time.RFC3339)
	tests := []struct {
		name      string
		s         PauseState
		reloading bool
		now       time.Time
		want      PauseStep
		invalid   bool
	}{
		{name: "no period, no pause", s: PauseState{}, reloading: true, now: at, want: PauseStep{}},
		{name: "a reload pauses for the period", s: PauseState{Period: "5m", HasPeriod: true}, reloading: true, now: at,
			want: PauseStep{Pause: true, PausedAt: stamp, Requeue: 5 * time.Minute}},
		{name: "no reload, no pause", s: PauseState{Period: "5m", HasPeriod: true}, now: at, want: PauseStep{}},
		{name: "a user's pause is left alone", s: PauseState{Paused: true, Period: "5m", HasPeriod: true}, reloading: true, now: at, want: PauseStep{}},
		{name: "within the period: come back at its end", s: PauseState{Paused: true, PausedAt: stamp, HasPausedAt: true, Period: "5m", HasPeriod: true},
			now: at.Add(2 * time.Minute), want: PauseStep{Requeue: 3 * time.Minute}},
		{name: "a reload within the period stays paused", s: PauseState{Paused: true, PausedAt: stamp, HasPausedAt: true, Period: "5m", HasPeriod: true},
			reloading: true, now: at.Add(time.Minute), want: PauseStep{Requeue: 4 * time.Minute}},
		{name: "period over: resume", s: PauseState{Paused: true, PausedAt: stamp, HasPausedAt: true, Period: "5m", HasPeriod: true},
			now: at.Add(5 * time.Minute), want: PauseStep{Resume: true, ClearPausedAt: true}},
		{name: "resumed by hand: the pause is over", s: PauseState{PausedAt: stamp, HasPausedAt: true, Period: "5m", HasPeriod: true},
			now: at.Add(time.Minute), want: PauseStep{ClearPausedAt: true}},
		{name: "a bad period reloads unpaused", s: PauseState{Period: "soon", HasPeriod: true}, reloading: true, now: at,
			want: PauseStep{}, invalid: true},
		{name: "a period removed while paused resumes", s: PauseState{Paused: true, PausedAt: stamp, HasPausedAt: true},
			now: at.Add(time.Minute), want: PauseStep{Resume: true, ClearPausedAt: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PlanPause(keys, tt.s, tt.reloading, tt.now)
			if (got.Invalid != nil) != tt.invalid {
				t.Errorf("Invalid = %v, want invalid %v", got.Invalid, tt.invalid)
			}
			got.Invalid = nil
			if got != tt.want {
				t.Errorf("PlanPause = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// What a strategy writes is a function of the changes alone: the same changes written onto
// the same copy, at another time (a stale read, a retry), give the same template, so the
// repeated patch rolls nothing.
func TestStrategiesWriteTheSameTemplateForTheSameChanges(t *testing.T) {
	type write struct {
		s    Strategy
		hash string
	}
	var writes []write
	for _, s := range []Strategy{EnvVars{}, Annotations{}} {
		for _, hash := range []string{"h1", Absent} {
			writes = append(writes, write{s, hash})
		}
	}
	apply := func(w write) *corev1.PodTemplateSpec {
		tpl := podTemplate()
		w.s.Apply(tpl, "ns", []Change{{ID: source.ID{Kind: source.ConfigMap, Name: "cfg"}, Hash: w.hash, Containers: []string{"app"}}})
		return tpl
	}
	first := make([]*corev1.PodTemplateSpec, len(writes))
	for i, w := range writes {
		first[i] = apply(w)
	}
	time.Sleep(1100 * time.Millisecond) // a clock of second resolution has moved on
	for i, w := range writes {
		if again := apply(w); !reflect.DeepEqual(first[i], again) {
			t.Errorf("%T, hash %q: the same changes wrote different templates:\n%+v\n%+v", w.s, w.hash, first[i], again)
		}
		if reflect.DeepEqual(first[i], podTemplate()) {
			t.Errorf("%T, hash %q: the write left the template unchanged, so nothing rolls", w.s, w.hash)
		}
	}
}

func podTemplate() *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}, {Name: "side"}}}}
}

// A deletion must roll the pods even where there is no env var to remove: the container
// gets the Deleted marker instead; where there is one, it is removed, as upstream does.
func TestEnvVarsMarksADeletionThatHasNoEnvVarToRemove(t *testing.T) {
	id := source.ID{Kind: source.ConfigMap, Name: "cfg"}
	tpl := podTemplate()
	tpl.Spec.Containers[1].Env = []corev1.EnvVar{{Name: EnvVarName(id), Value: "h1"}}
	EnvVars{}.Apply(tpl, "ns", []Change{{ID: id, Hash: Absent, Containers: []string{"app", "side"}}})
	if got := tpl.Spec.Containers[0].Env; !reflect.DeepEqual(got, []corev1.EnvVar{{Name: EnvVarName(id), Value: Deleted}}) {
		t.Errorf("app, which never had the env var: %v", got)
	}
	if got := tpl.Spec.Containers[1].Env; len(got) != 0 {
		t.Errorf("side, which had it: %v", got)
	}
}
