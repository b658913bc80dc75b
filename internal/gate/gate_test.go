package gate_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/reloader-operator/reloader/internal/gate"
	"github.com/reloader-operator/reloader/internal/gate/gatetest"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
)

// fixed answers the same verdict every time and remembers what it saw.
type fixed struct {
	name   string
	v      gate.Verdict
	err    error
	seen   []gate.Due
	forgot []string
}

func (f *fixed) Name() string { return f.name }
func (f *fixed) Check(_ context.Context, d gate.Due) (gate.Verdict, error) {
	f.seen = append(f.seen, d)
	return f.v, f.err
}
func (f *fixed) Forget(key string) { f.forgot = append(f.forgot, key) }

func str(s string) *string { return &s }

func due() gate.Due {
	return gatetest.For("ns", "app", nil).Changed(source.ConfigMap, "cm", "h1", nil).Due()
}

func TestTheFirstHoldInChainOrderWins(t *testing.T) {
	until := gatetest.Epoch.Add(time.Minute)
	a := &fixed{name: "a"}
	b := &fixed{name: "b", v: gate.Verdict{Hold: reload.Hold{Reason: "B", Until: until}}}
	c := &fixed{name: "c", v: gate.Verdict{Hold: reload.Hold{Reason: "C"}, Annotate: map[string]*string{"c": str("1")}}}
	res, err := gate.Chain{a, b, c}.Check(context.Background(), due())
	if err != nil {
		t.Fatal(err)
	}
	if res.Held == nil || res.Held.Gate != "b" || res.Held.Reason != "B" || !res.Held.Until.Equal(until) {
		t.Fatalf("held = %+v, want b's hold", res.Held)
	}
	// c is still asked, sees b's hold ahead, and its annotations still count.
	if len(c.seen) != 1 || c.seen[0].Ahead == nil || c.seen[0].Ahead.Gate != "b" {
		t.Fatalf("c saw %+v, want b's hold ahead", c.seen)
	}
	if a.seen[0].Ahead != nil {
		t.Fatalf("a saw a hold ahead of it: %+v", a.seen[0].Ahead)
	}
	if v := res.Annotate["c"]; v == nil || *v != "1" {
		t.Fatalf("annotate = %v, want c's", res.Annotate)
	}
}

func TestNotifyEndsThePipelineButNotAnEarlierHold(t *testing.T) {
	notify := &fixed{name: "mode", v: gate.Verdict{Notify: true}}
	wave := &fixed{name: "wave", v: gate.Verdict{Hold: reload.Hold{Reason: "Wave"}}}
	res, err := gate.Chain{notify, wave}.Check(context.Background(), due())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Notify || res.NotifiedBy != "mode" || res.Held != nil {
		t.Fatalf("notify then hold: %+v, want notify by mode and no hold", res)
	}
	if !wave.seen[0].Notify {
		t.Fatal("the wave gate was not told of the notify ahead of it")
	}
	q := &fixed{name: "quarantine", v: gate.Verdict{Hold: reload.Hold{Reason: "Quarantined"}}}
	res, err = gate.Chain{q, notify}.Check(context.Background(), due())
	if err != nil {
		t.Fatal(err)
	}
	if res.Notify || res.Held == nil || res.Held.Gate != "quarantine" {
		t.Fatalf("hold then notify: %+v, want the quarantine to hold and no notify", res)
	}
}

func TestChainGathersNoticesRequeuesAndAnnotationsInOrder(t *testing.T) {
	a := &fixed{name: "a", v: gate.Verdict{Requeue: 30 * time.Second, Notices: []gate.Notice{{Reason: "A"}},
		Annotate: map[string]*string{"k": str("a"), "x": nil}, Invalid: []error{errors.New("bad a")}}}
	b := &fixed{name: "b", v: gate.Verdict{Requeue: 10 * time.Second, Notices: []gate.Notice{{Reason: "B", Once: "b1"}},
		Annotate: map[string]*string{"k": str("b")}, Spend: map[string]*string{"s": nil}}}
	res, err := gate.Chain{a, b}.Check(context.Background(), due())
	if err != nil {
		t.Fatal(err)
	}
	if res.Requeue != 10*time.Second {
		t.Errorf("requeue = %v, want the soonest, 10s", res.Requeue)
	}
	var said []string
	for _, n := range res.Notices {
		said = append(said, n.Gate+":"+n.Reason)
	}
	if !slices.Equal(said, []string{"a:A", "b:B"}) {
		t.Errorf("notices = %v, want a:A then b:B", said)
	}
	if v, ok := res.Annotate["x"]; !ok || v != nil {
		t.Errorf("a's removal of x lost: %v", res.Annotate)
	}
	if v := res.Annotate["k"]; v == nil || *v != "b" {
		t.Errorf("k = %v, want the later gate's value b", v)
	}
	if _, ok := res.Spend["s"]; !ok || len(res.Invalid) != 1 {
		t.Errorf("spend %v invalid %v, want b's spend and a's invalid", res.Spend, res.Invalid)
	}
}

func TestAnErrorStopsTheChain(t *testing.T) {
	a := &fixed{name: "a", err: errors.New("read failed")}
	b := &fixed{name: "b"}
	if _, err := (gate.Chain{a, b}).Check(context.Background(), due()); err == nil {
		t.Fatal("no error from a failing gate")
	}
	if len(b.seen) != 0 {
		t.Fatal("a gate after a failed one was asked")
	}
}

func TestForgetReachesEveryGateThatKeepsState(t *testing.T) {
	a, b := &fixed{name: "a"}, &fixed{name: "b"}
	c := gate.Chain{a, b}
	c.Forget("Deployment/ns/app")
	if len(a.forgot) != 1 || len(b.forgot) != 1 {
		t.Fatalf("forgot a=%v b=%v", a.forgot, b.forgot)
	}
	if got := c.Names(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("names = %v", got)
	}
}

func TestSettledChangesLeaveTheDueOfTheGatesAfter(t *testing.T) {
	d := gatetest.For("ns", "app", nil).Changed(source.ConfigMap, "a", "h1", nil).Changed(source.ConfigMap, "b", "h2", nil).Due()
	aborted := reload.Change{ID: source.ID{Kind: source.ConfigMap, Name: "a"}, Hash: "h1"}
	wave := &fixed{name: "wave", v: gate.Verdict{Settled: []reload.Change{aborted}}}
	approve := &fixed{name: "approve"}
	res, err := gate.Chain{wave, approve}.Check(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Settled) != 1 || res.Settled[0].ID != aborted.ID {
		t.Fatalf("settled = %v, want the wave's", res.Settled)
	}
	if got := approve.seen[0].Changes; len(got) != 1 || got[0].ID.Name != "b" {
		t.Fatalf("the gate after saw %v, want only b", got)
	}
	if len(d.Changes) != 2 {
		t.Fatalf("the caller's Due changed: %v", d.Changes)
	}
}
