// Package pipelinetest is the fast tier of the workload reconciler's reload pipeline: the real
// driver (observe, plan, the gates in chain order, the rate, the write, the reporter) on a
// fake client and a fake clock. No API server, no manager.
package pipelinetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reloader-operator/reloader/internal/coalesce"
	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/gate"
	"github.com/reloader-operator/reloader/internal/gate/gatetest"
	"github.com/reloader-operator/reloader/internal/gate/window"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/report"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/workload"
)

const ns = "team"

// value reads a counter or a gauge.
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

// stand is a gate that answers as told, and remembers what it saw.
type stand struct {
	name   string
	hold   bool
	notify bool
	until  time.Duration
	mu     sync.Mutex
	seen   []gate.Due
}

func (s *stand) Name() string { return s.name }

func (s *stand) Check(_ context.Context, d gate.Due) (gate.Verdict, error) {
	s.mu.Lock()
	s.seen = append(s.seen, d)
	s.mu.Unlock()
	var v gate.Verdict
	switch {
	case len(d.Changes) == 0:
	case s.hold:
		v.Hold = reload.Hold{Reason: s.name, Why: "held by " + s.name}
		if s.until > 0 {
			v.Hold.Until = d.Now.Add(s.until)
		}
	case s.notify:
		// As mode notify does: its notice is said once the record is written.
		v.Notify = true
		v.Notices = []gate.Notice{{Reason: controller.ReasonReloadNotified, Action: "Notify", Written: true, Message: "would reload"}}
	}
	return v, nil
}

func (s *stand) last() gate.Due {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[len(s.seen)-1]
}

// events remembers the reasons of the Events recorded.
type events struct {
	mu      sync.Mutex
	reasons []string
}

func (e *events) Eventf(_, _ runtime.Object, _, reason, _, _ string, _ ...any) {
	e.mu.Lock()
	e.reasons = append(e.reasons, reason)
	e.mu.Unlock()
}

func (e *events) AnnotatedEventf(regarding, related runtime.Object, _ map[string]string, eventtype, reason, action, note string, args ...any) {
	e.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

func (e *events) count(reason string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, r := range e.reasons {
		if r == reason {
			n++
		}
	}
	return n
}

// world is one Deployment using one ConfigMap, and the reconciler of Deployments over a fake
// client, with the chain of gates given.
type world struct {
	t      *testing.T
	c      client.Client
	r      *controller.WorkloadReconciler
	clock  *gatetest.Clock
	events *events
}

func newWorld(t *testing.T, chain gate.Chain, annotations map[string]string) *world {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}, Data: map[string]string{"k": "v1"}}
	ann := map[string]string{"reloader.stakater.com/auto": "true"}
	for k, v := range annotations {
		ann[k] = v
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Annotations: ann, Generation: 1, UID: "uid-web"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app",
					EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}}},
			},
		},
	}
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(cm, d).Build()
	clock := gatetest.NewClock()
	ev := &events{}
	r := &controller.WorkloadReconciler{
		Client: c, Kind: workload.Deployment(), Reads: controller.Reads{Sources: []sourcecache.SourceType{sourcecache.ConfigMaps}},
		Settings: controller.Settings{Policy: reload.Policy{Keys: reload.DefaultKeys()}, Strategy: reload.EnvVars{}}, Window: coalesce.New(0),
		Report: report.New(ev, metrics.New(prometheus.NewRegistry(), false), nil), Now: clock.Now, Gates: chain,
	}
	w := &world{t: t, c: c, r: r, clock: clock, events: ev}
	w.reconcile() // the first sighting records the content
	if _, ok := w.deployment().Annotations[reload.RecordAnnotation]; !ok {
		t.Fatal("the first reconcile wrote no record")
	}
	return w
}

func (w *world) reconcile() {
	w.t.Helper()
	req := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "web"}}
	if _, err := w.r.Reconcile(context.Background(), req); err != nil {
		w.t.Fatalf("reconcile: %v", err)
	}
}

func (w *world) deployment() *appsv1.Deployment {
	w.t.Helper()
	d := &appsv1.Deployment{}
	if err := w.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, d); err != nil {
		w.t.Fatal(err)
	}
	return d
}

// change writes new content into the ConfigMap.
func (w *world) change(v string) {
	w.t.Helper()
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: ns, Name: "cfg"}
	if err := w.c.Get(context.Background(), key, cm); err != nil {
		w.t.Fatal(err)
	}
	cm.Data["k"] = v
	if err := w.c.Update(context.Background(), cm); err != nil {
		w.t.Fatal(err)
	}
}

// rewind sets the workload's record back to what it was: the content it rolled on is due
// again, and its template already holds it (an unrolled reload).
func (w *world) rewind(record string) {
	w.t.Helper()
	d := w.deployment()
	d.Annotations[reload.RecordAnnotation] = record
	if err := w.c.Update(context.Background(), d); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) outcome(o string) float64 {
	return value(w.r.Report.Metrics.Reconciles.WithLabelValues("Deployment", o))
}

// chainOf is the chain in the order internal/app builds it: quarantine, notify, wave, approve,
// then the workload's own window (the real gate).
func chainOf(gates ...*stand) gate.Chain {
	c := gate.Chain{}
	for _, g := range gates {
		c = append(c, g)
	}
	return append(c, window.Gate{})
}

func stands() []*stand {
	return []*stand{{name: "quarantine", until: time.Minute}, {name: "notify"}, {name: "wave", until: 5 * time.Second}, {name: "approve"}}
}

// TestPrecedenceMatrix: each gate, holding (notify: notifying) or letting go, with a reload
// due, nothing due, or a due reload the template already holds (unrolled), through the real
// driver: the first in chain order wins, the gates after it see it ahead and are still asked,
// the rate is asked only when no gate holds, and only a reload that goes is written.
func TestPrecedenceMatrix(t *testing.T) {
	for i := range stands() {
		for _, state := range []string{"due", "not due", "unrolled"} {
			for _, acts := range []bool{true, false} {
				name := fmt.Sprintf("%s/%s/acts=%v", stands()[i].name, state, acts)
				t.Run(name, func(t *testing.T) {
					gs := stands()
					g := gs[i]
					if g.name == "notify" {
						g.notify = acts
					} else {
						g.hold = acts
					}
					w := newWorld(t, chainOf(gs...), nil)
					recorded := w.deployment().Annotations[reload.RecordAnnotation]
					switch state {
					case "due":
						w.change("v2")
					case "unrolled":
						for _, s := range gs {
							s.hold, s.notify = false, false
						}
						w.change("v2")
						w.reconcile() // rolls v2
						w.rewind(recorded)
						if g.name == "notify" {
							g.notify = acts
						} else {
							g.hold = acts
						}
					}
					before := w.deployment()
					held, reloaded := w.outcome(metrics.OutcomeHeld), w.outcome(metrics.OutcomeReloaded)
					w.reconcile()
					after := w.deployment()
					for j, s := range gs {
						d := s.last()
						if state == "not due" {
							if len(d.Changes) != 0 {
								t.Errorf("%s saw changes %v with nothing due", s.name, d.Changes)
							}
							continue
						}
						if len(d.Changes) != 1 {
							t.Errorf("%s saw changes %v; want the one due", s.name, d.Changes)
						}
						wantAhead := acts && j > i && g.name != "notify"
						if (d.Ahead != nil) != wantAhead || (wantAhead && d.Ahead.Gate != g.name) {
							t.Errorf("%s saw ahead %+v; want %s's hold: %v", s.name, d.Ahead, g.name, wantAhead)
						}
						if wantNotify := acts && j > i && g.name == "notify"; d.Notify != wantNotify {
							t.Errorf("%s saw notify %v; want %v", s.name, d.Notify, wantNotify)
						}
					}
					rolled := before.Spec.Template.String() != after.Spec.Template.String()
					moved := before.Annotations[reload.RecordAnnotation] != after.Annotations[reload.RecordAnnotation]
					switch {
					case state == "not due":
						if rolled || moved {
							t.Errorf("nothing due: rolled %v, record moved %v", rolled, moved)
						}
					case acts && g.name == "notify":
						if rolled || !moved || w.events.count(controller.ReasonReloadNotified) != 1 {
							t.Errorf("notified: rolled %v, record moved %v, %d ReloadNotified Events; want no roll, the record, one Event", rolled, moved, w.events.count(controller.ReasonReloadNotified))
						}
					case acts:
						if rolled || moved || w.outcome(metrics.OutcomeHeld) != held+1 {
							t.Errorf("held by %s: rolled %v, record moved %v, held outcomes %v -> %v", g.name, rolled, moved, held, w.outcome(metrics.OutcomeHeld))
						}
						if g.until > 0 && value(w.r.Report.Metrics.Waiting.WithLabelValues(g.name)) != 1 {
							t.Errorf("held by %s until a time: not counted as waiting", g.name)
						}
					case state == "unrolled":
						if rolled || !moved || w.outcome(metrics.OutcomeReloaded) != reloaded {
							t.Errorf("unrolled: rolled %v, record moved %v, reloaded outcomes %v -> %v; want the record alone", rolled, moved, reloaded, w.outcome(metrics.OutcomeReloaded))
						}
					default:
						if !rolled || !moved || w.outcome(metrics.OutcomeReloaded) != reloaded+1 {
							t.Errorf("let go: rolled %v, record moved %v", rolled, moved)
						}
					}
				})
			}
		}
	}
}

// TestWindowThenRate: the workload's own window holds first; when it opens, the rate limiter
// is asked (its slot reserved), and the reload goes.
func TestWindowThenRate(t *testing.T) {
	w := newWorld(t, chainOf(stands()...), map[string]string{reload.ReloadWindowAnnotation: "daily 10:05-11:00 UTC"})
	w.change("v2")
	w.reconcile()
	if w.events.count(controller.ReasonReloadHeld) != 1 || value(w.r.Report.Metrics.Held.WithLabelValues(reload.HoldReloadWindow)) != 1 {
		t.Fatalf("a shut window: %d ReloadHeld Events; want one", w.events.count(controller.ReasonReloadHeld))
	}
	w.reconcile()
	if w.events.count(controller.ReasonReloadHeld) != 1 {
		t.Errorf("the same hold again: %d ReloadHeld Events; want it said once", w.events.count(controller.ReasonReloadHeld))
	}
	w.clock.Step(5 * time.Minute)
	w.reconcile()
	if w.outcome(metrics.OutcomeReloaded) != 1 || value(w.r.Report.Metrics.Waiting.WithLabelValues(reload.HoldReloadWindow)) != 0 {
		t.Errorf("the window open: reloaded %v; want 1, and no longer waiting", w.outcome(metrics.OutcomeReloaded))
	}
}

// TestExplainHoldsAsTheLivePathDoes: for the same state, explain (the pipeline run dry) and
// the live reconcile find the same hold, and explain reserves and says nothing.
func TestExplainHoldsAsTheLivePathDoes(t *testing.T) {
	cases := []struct {
		name string
		ann  map[string]string
		hold int // which stand holds; -1 none
		want string
	}{
		{"a gate's hold", nil, 2, "wave"},
		{"the first of two holds", nil, 0, "quarantine"},
		{"the workload's window", map[string]string{reload.ReloadWindowAnnotation: "daily 03:00-04:00 UTC"}, -1, reload.HoldReloadWindow},
		{"no hold", nil, -1, ""},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			gs := stands()
			if tt.hold >= 0 {
				gs[tt.hold].hold = true
				gs[2].hold = true // a later hold never wins over an earlier one
			}
			w := newWorld(t, chainOf(gs...), tt.ann)
			w.change("v2")
			held, _, err := w.r.HeldNow(context.Background(), w.deployment())
			if err != nil {
				t.Fatal(err)
			}
			if !gs[0].last().DryRun {
				t.Error("explain ran the gates live")
			}
			if w.events.count(controller.ReasonReloadHeld) != 0 || w.outcome(metrics.OutcomeHeld) != 0 {
				t.Error("explain said or counted something")
			}
			w.reconcile()
			live := w.outcome(metrics.OutcomeHeld) == 1
			if held.Reason != tt.want || live != (tt.want != "") {
				t.Errorf("explain: held by %q; live held: %v; want %q for both", held.Reason, live, tt.want)
			}
			if tt.want != "" && w.deployment().Annotations[reload.RecordAnnotation] != "" && w.outcome(metrics.OutcomeReloaded) != 0 {
				t.Error("the live path rolled a reload explain found held")
			}
		})
	}
}
