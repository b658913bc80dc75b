package report_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/reloader-operator/reloader/internal/gate"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/report"
	"github.com/reloader-operator/reloader/internal/source"
)

type recorded struct {
	mu    sync.Mutex
	types []string
	notes []string
}

func (r *recorded) Eventf(_, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.types = append(r.types, eventtype+" "+reason)
	r.notes = append(r.notes, note)
}

func (r *recorded) AnnotatedEventf(regarding, related runtime.Object, _ map[string]string, eventtype, reason, action, note string, args ...any) {
	r.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

func value(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	if m.Gauge != nil {
		return m.Gauge.GetValue()
	}
	return m.Counter.GetValue()
}

func newReporter() (*report.Reporter, *recorded) {
	rec := &recorded{}
	return report.New(rec, metrics.New(prometheus.NewRegistry(), false), nil), rec
}

var target = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}

func TestWaitingCountsEachTargetOnceByItsReason(t *testing.T) {
	r, _ := newReporter()
	r.Waiting("a", reload.HoldReloadWindow)
	r.Waiting("a", reload.HoldReloadWindow)
	r.Waiting("b", reload.HoldReloadWindow)
	if g := value(r.Metrics.Waiting.WithLabelValues(reload.HoldReloadWindow)); g != 2 {
		t.Fatalf("two targets held by their window: gauge %v", g)
	}
	r.Waiting("a", reload.HoldRateLimit)
	if w, rl := value(r.Metrics.Waiting.WithLabelValues(reload.HoldReloadWindow)), value(r.Metrics.Waiting.WithLabelValues(reload.HoldRateLimit)); w != 1 || rl != 1 {
		t.Fatalf("one moved to the rate limit: window %v, rate %v", w, rl)
	}
	r.Waiting("a", "")
	r.Forget("b")
	r.Forget("never-seen")
	if w, rl := value(r.Metrics.Waiting.WithLabelValues(reload.HoldReloadWindow)), value(r.Metrics.Waiting.WithLabelValues(reload.HoldRateLimit)); w != 0 || rl != 0 {
		t.Fatalf("none waits: window %v, rate %v", w, rl)
	}
}

func TestANoticeIsSaidOnceWhileItsGateKeepsSayingIt(t *testing.T) {
	r, rec := newReporter()
	ctx := context.Background()
	held := gate.Said{Gate: "window", Notice: gate.Notice{Reason: report.ReasonReloadHeld, Message: "held", Once: "until 03:00", Held: reload.HoldReloadWindow}}
	r.Say(ctx, "a", target, nil, []gate.Said{held}, true)
	r.Say(ctx, "a", target, nil, []gate.Said{held}, true)
	r.Say(ctx, "b", target, nil, []gate.Said{held}, true) // another target: its own memory
	if len(rec.types) != 2 || value(r.Metrics.Held.WithLabelValues(reload.HoldReloadWindow)) != 2 {
		t.Fatalf("the same hold of two targets, one of them told twice: Events %v, held %v", rec.types, value(r.Metrics.Held.WithLabelValues(reload.HoldReloadWindow)))
	}
	moved := held
	moved.Once = "until 04:00"
	r.Say(ctx, "a", target, nil, []gate.Said{moved}, true)
	if len(rec.types) != 3 {
		t.Fatalf("a hold that moved: Events %v; want it said", rec.types)
	}
	r.Say(ctx, "a", target, nil, nil, true) // the gate says nothing: it ended
	r.Say(ctx, "a", target, nil, []gate.Said{moved}, true)
	if len(rec.types) != 4 {
		t.Fatalf("a hold that ended and came back: Events %v; want it said again", rec.types)
	}
	quiet := gate.Said{Gate: "rate", Notice: gate.Notice{Reason: report.ReasonReloadHeld, Message: "short", Once: "x", Quiet: true, Held: reload.HoldRateLimit}}
	r.Say(ctx, "a", target, nil, []gate.Said{quiet}, true)
	if len(rec.types) != 4 || value(r.Metrics.Held.WithLabelValues(reload.HoldRateLimit)) != 1 {
		t.Fatalf("a quiet notice: Events %v, held %v; want no Event, counted", rec.types, value(r.Metrics.Held.WithLabelValues(reload.HoldRateLimit)))
	}
}

func TestInvalidSettingsAreOneWarning(t *testing.T) {
	r, rec := newReporter()
	r.Invalid(context.Background(), target)
	r.Invalid(context.Background(), target, errors.New("annotation a: bad"), errors.New("annotation b: bad"))
	if len(rec.types) != 1 || rec.types[0] != corev1.EventTypeWarning+" "+report.ReasonInvalidAnnotation {
		t.Fatalf("Events %v; want one InvalidAnnotation Warning", rec.types)
	}
}

func TestDoneTellsTheOutcome(t *testing.T) {
	r, rec := newReporter()
	var heard []report.Reloaded
	r.OnReload = func(rl report.Reloaded) { heard = append(heard, rl) }
	ctx := context.Background()
	ch := []reload.Change{{ID: source.ID{Kind: source.ConfigMap, Name: "cfg"}, Hash: "h2"}}
	if o := r.Done(ctx, target, report.Outcome{Kind: "Deployment", Wrote: true}); o != metrics.OutcomeRecorded {
		t.Errorf("a record written: %s", o)
	}
	if o := r.Done(ctx, target, report.Outcome{Kind: "Deployment"}); o != metrics.OutcomeUnchanged {
		t.Errorf("nothing written: %s", o)
	}
	if o := r.Done(ctx, target, report.Outcome{Kind: "Deployment", Reloaded: ch, Failed: errors.New("boom")}); o != metrics.OutcomeError {
		t.Errorf("a write that failed: %s", o)
	}
	if o := r.Done(ctx, target, report.Outcome{Kind: "Deployment", Reloaded: ch, Wrote: true}); o != metrics.OutcomeReloaded {
		t.Errorf("a reload: %s", o)
	}
	if len(rec.types) != 2 || rec.types[0] != corev1.EventTypeWarning+" "+report.ReasonReloadFail || rec.types[1] != corev1.EventTypeNormal+" "+report.ReasonReloaded {
		t.Errorf("Events %v; want ReloadFail then Reloaded", rec.types)
	}
	if len(heard) != 1 || heard[0].Kind != "Deployment" || len(heard[0].Changes) != 1 {
		t.Errorf("OnReload heard %+v; want the one reload", heard)
	}
}

// A source that flaps back to the content the workload runs leaves nothing due: the quarantine
// that holds its next flip is the same one, and is not announced again.
func TestNothingDueForgetsNoNotice(t *testing.T) {
	r, rec := newReporter()
	ctx := context.Background()
	q := gate.Said{Gate: "quarantine", Notice: gate.Notice{Warning: true, Reason: "SourceQuarantined", Message: "quarantined", Once: "cm/app since 10:00"}}
	r.Say(ctx, "a", target, nil, []gate.Said{q}, true)
	r.Say(ctx, "a", target, nil, nil, false) // flipped back: nothing due
	r.Say(ctx, "a", target, nil, []gate.Said{q}, true)
	if len(rec.types) != 1 {
		t.Fatalf("a quarantine across a reconcile with nothing due: Events %v; want it said once", rec.types)
	}
	r.Say(ctx, "a", target, nil, nil, true) // due and not held: the quarantine ended
	r.Say(ctx, "a", target, nil, []gate.Said{q}, true)
	if len(rec.types) != 2 {
		t.Fatalf("a quarantine that ended and came back: Events %v; want it said again", rec.types)
	}
}
