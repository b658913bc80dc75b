package mode_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/reloader-operator/reloader/internal/approval"
	"github.com/reloader-operator/reloader/internal/gate"
	"github.com/reloader-operator/reloader/internal/gate/gatetest"
	"github.com/reloader-operator/reloader/internal/gate/mode"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/whatchanged"
)

type counters struct {
	held, notified *prometheus.CounterVec
	pending        prometheus.Gauge
}

func newModes(dflt approval.Mode) (*mode.Mode, counters) {
	c := counters{
		held:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "held"}, []string{"reason"}),
		notified: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "notified"}, []string{"kind", "namespace"}),
		pending:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "pending"}),
	}
	return mode.New(mode.Config{Default: dflt, Held: c.held, Notified: c.notified, Pending: c.pending}), c
}

func value(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Gauge != nil {
		return m.GetGauge().GetValue()
	}
	return m.GetCounter().GetValue()
}

func check(t *testing.T, g gate.Gate, d gate.Due) gate.Verdict {
	t.Helper()
	v, err := g.Check(context.Background(), d)
	if err != nil {
		t.Fatalf("%s: %v", g.Name(), err)
	}
	return v
}

var cm = source.ID{Kind: source.ConfigMap, Name: "cfg"}

func changed(ann map[string]string) *gatetest.Builder {
	return gatetest.For("ns", "web", ann).Changed(source.ConfigMap, "cfg", "h2", nil)
}

func TestModeApproveHoldsUntilTheDigestIsApprovedAndSpendsIt(t *testing.T) {
	m, c := newModes(approval.Approve)
	written := gatetest.Epoch.Add(-time.Minute)
	d := changed(nil).Written(source.ConfigMap, "cfg", written).Due()
	digest := approval.Digest(d.Changes)

	v := check(t, m.Approve(), d)
	if v.Hold.Reason != approval.HoldReason {
		t.Fatalf("hold = %+v, want approval", v.Hold)
	}
	for _, w := range []string{"waiting for approval of " + digest, "since " + written.Format(time.RFC3339), "kubectl reloader approve deployment/web -n ns"} {
		if !strings.Contains(v.Hold.Why, w) {
			t.Errorf("why %q does not say %q", v.Hold.Why, w)
		}
	}
	if p := v.Annotate[approval.PendingAnnotation]; p == nil || *p != digest {
		t.Errorf("annotate = %v, want the digest published", v.Annotate)
	}
	if len(v.Notices) != 1 || v.Notices[0].Reason != mode.ReasonApprovalPending || v.Notices[0].Once != digest ||
		v.Notices[0].Alert == nil || v.Notices[0].Alert.Mode != "approve" || v.Requeue != 0 {
		t.Errorf("verdict = %+v, want the pending notice once per digest, no poll (watched)", v)
	}
	if got := value(t, c.pending); got != 1 {
		t.Errorf("pending = %v, want 1", got)
	}
	// Asked again, the gauge counts the target once.
	check(t, m.Approve(), changed(map[string]string{approval.PendingAnnotation: digest}).Written(source.ConfigMap, "cfg", written).Due())
	if got := value(t, c.pending); got != 1 {
		t.Errorf("pending = %v after a second look, want 1", got)
	}

	// Approved: no hold, the approval and the published digest are spent with the reload.
	ann := map[string]string{approval.PendingAnnotation: digest, approval.ApprovedAnnotation: digest}
	v = check(t, m.Approve(), changed(ann).Due())
	if v.Hold.Reason != "" || len(v.Notices) != 0 || len(v.Annotate) != 0 {
		t.Fatalf("approved: %+v, want it to go", v)
	}
	if a, ok := v.Spend[approval.ApprovedAnnotation]; !ok || a != nil {
		t.Errorf("spend = %v, want the approval removed", v.Spend)
	}
	if p, ok := v.Spend[approval.PendingAnnotation]; !ok || p != nil {
		t.Errorf("spend = %v, want the pending digest removed", v.Spend)
	}
	if got := value(t, c.pending); got != 0 {
		t.Errorf("pending = %v once approved, want 0", got)
	}
}

func TestAnApprovalOfAnotherContentHolds(t *testing.T) {
	m, _ := newModes(approval.Approve)
	older := approval.Digest([]reload.Change{{ID: cm, Hash: "h1"}})
	v := check(t, m.Approve(), changed(map[string]string{approval.ApprovedAnnotation: older}).Due())
	if v.Hold.Reason != approval.HoldReason || !strings.Contains(v.Hold.Why, "names another content") || len(v.Spend) != 0 {
		t.Fatalf("an older approval: %+v, want a hold that says so and nothing spent", v)
	}
	// A bad approval is reported, and holds.
	v = check(t, m.Approve(), changed(map[string]string{approval.ApprovedAnnotation: "nope"}).Due())
	if v.Hold.Reason != approval.HoldReason || len(v.Invalid) != 1 {
		t.Fatalf("a bad approval: %+v, want a hold and one invalid", v)
	}
}

func TestNotifyRecordsAndSaysItOnceWritten(t *testing.T) {
	m, c := newModes(approval.Notify)
	what := func(ch []reload.Change) []whatchanged.Report {
		r := make([]whatchanged.Report, len(ch))
		for i := range r {
			r[i] = whatchanged.NewReport(whatchanged.Keys{Changed: []string{"k"}, NChanged: 1}, whatchanged.Writer{}, false)
		}
		return r
	}
	d := changed(nil).What(what).Due()
	v := check(t, m.Notify(), d)
	if !v.Notify || v.Hold.Reason != "" || len(v.Notices) != 1 {
		t.Fatalf("notify: %+v", v)
	}
	n := v.Notices[0]
	if n.Reason != mode.ReasonReloadNotified || !n.Written || n.Once != "" || n.Alert == nil || n.Alert.Mode != "notify" {
		t.Errorf("notice = %+v, want ReloadNotified said with the write, every time", n)
	}
	if !strings.Contains(n.Message, "ConfigMap cfg") || !strings.Contains(n.Message, "keys changed: k") || !strings.Contains(n.Message, "Would reload Deployment web") {
		t.Errorf("message %q does not name the ConfigMap and its key k", n.Message)
	}
	if len(n.Count) != 1 {
		t.Fatal("the notice counts nothing")
	}
	n.Count[0].Inc()
	if got := value(t, c.notified.WithLabelValues("Deployment", "ns")); got != 1 {
		t.Errorf("notified{Deployment,ns} = %v", got)
	}
	// The approve gate after it holds nothing, and removes a digest published before.
	d2 := changed(map[string]string{approval.PendingAnnotation: "x"}).Notified().Due()
	v = check(t, m.Approve(), d2)
	if v.Hold.Reason != "" || len(v.Notices) != 0 {
		t.Fatalf("approve after notify: %+v", v)
	}
	if p, ok := v.Annotate[approval.PendingAnnotation]; !ok || p != nil {
		t.Errorf("annotate = %v, want the pending digest removed", v.Annotate)
	}
	// Not due: neither says anything.
	if v := check(t, m.Notify(), gatetest.For("ns", "web", nil).Due()); v.Notify || len(v.Notices) != 0 {
		t.Fatalf("not due: %+v", v)
	}
}

func TestTheModeResolvesAnnotationOverConfigOverFlag(t *testing.T) {
	m, _ := newModes(approval.Notify)
	// The flag says notify; a ReloaderConfig says reload; the workload's annotation says approve.
	reloadMode := reload.Overrides{Mode: string(approval.Reload)}
	if v := check(t, m.Notify(), changed(nil).Overrides(reloadMode).Due()); v.Notify {
		t.Error("the config's reload lost to the flag's notify")
	}
	if v := check(t, m.Notify(), changed(nil).Due()); !v.Notify {
		t.Error("the flag's notify not applied")
	}
	ann := map[string]string{approval.ModeAnnotation: string(approval.Approve)}
	if v := check(t, m.Approve(), changed(ann).Overrides(reloadMode).Due()); v.Hold.Reason != approval.HoldReason {
		t.Errorf("the annotation's approve lost to the config: %+v", v)
	}
	// A source's mode, and a bad annotation reported once, by the notify gate only.
	bad := map[string]string{approval.ModeAnnotation: "sometimes"}
	if v := check(t, m.Notify(), changed(bad).Due()); len(v.Invalid) != 1 || !v.Notify {
		t.Errorf("bad annotation: %+v, want one invalid and the flag's notify", v)
	}
	if v := check(t, m.Approve(), changed(bad).Due()); len(v.Invalid) != 0 {
		t.Errorf("the approve gate reported the mode annotation again: %v", v.Invalid)
	}
	src := gatetest.For("ns", "web", nil).Changed(source.ConfigMap, "cfg", "h2", map[string]string{approval.ModeAnnotation: "approve"}).Overrides(reloadMode).Due()
	if v := check(t, m.Approve(), src); v.Hold.Reason != approval.HoldReason {
		t.Errorf("the source's approve not applied: %+v", v)
	}
}

func TestAHoldAheadMeansNothingWaitsForApproval(t *testing.T) {
	m, c := newModes(approval.Approve)
	digest := approval.Digest(changed(nil).Due().Changes)
	check(t, m.Approve(), changed(nil).Due())
	if got := value(t, c.pending); got != 1 {
		t.Fatalf("pending = %v", got)
	}
	d := changed(map[string]string{approval.PendingAnnotation: digest}).Ahead("wave", reload.Hold{Reason: "wave"}).Due()
	v := check(t, m.Approve(), d)
	if v.Hold.Reason != "" || len(v.Notices) != 0 {
		t.Fatalf("held ahead: %+v, want nothing of its own", v)
	}
	if p, ok := v.Annotate[approval.PendingAnnotation]; !ok || p != nil {
		t.Errorf("annotate = %v, want the digest unpublished while the wave holds", v.Annotate)
	}
	if got := value(t, c.pending); got != 0 {
		t.Errorf("pending = %v while a wave holds, want 0", got)
	}
	if v := check(t, m.Notify(), changed(nil).Ahead("quarantine", reload.Hold{Reason: "quarantine"}).Due()); v.Notify || len(v.Invalid) != 0 {
		t.Errorf("notify behind a quarantine: %+v", v)
	}
}

func TestApprovalPolledWithoutWatchAndSinceFirstSeen(t *testing.T) {
	m, _ := newModes(approval.Approve)
	clock := gatetest.NewClock()
	// A content without a known writer (a deleted source): since this process first saw it.
	v := check(t, m.Approve(), changed(nil).Live().At(clock.Now()).Due())
	if v.Requeue != mode.Poll {
		t.Errorf("requeue = %v without watch, want %v", v.Requeue, mode.Poll)
	}
	first := clock.Now()
	clock.Step(time.Minute)
	v = check(t, m.Approve(), changed(nil).Live().At(clock.Now()).Due())
	if !strings.Contains(v.Hold.Why, "since "+first.Format(time.RFC3339)) {
		t.Errorf("why %q, want since the first sight %v", v.Hold.Why, first)
	}
}

func TestDryRunRemembersNothingAndForgetDropsTheCount(t *testing.T) {
	m, c := newModes(approval.Approve)
	v := check(t, m.Approve(), changed(nil).DryRun().Due())
	if v.Hold.Reason != approval.HoldReason || strings.Contains(v.Hold.Why, " since ") {
		t.Fatalf("dry run: %+v, want the hold, since unknown", v.Hold)
	}
	if got := value(t, c.pending); got != 0 {
		t.Fatalf("a dry run counted the target as pending: %v", got)
	}
	check(t, m.Approve(), changed(nil).Due())
	if got := value(t, c.pending); got != 1 {
		t.Fatalf("pending = %v", got)
	}
	// A dry run in the middle does not forget it either.
	check(t, m.Approve(), gatetest.For("ns", "web", nil).DryRun().Due())
	if got := value(t, c.pending); got != 1 {
		t.Fatalf("a dry run with nothing due forgot the pending count: %v", got)
	}
	m.Approve().(gate.Forgetter).Forget("Deployment/ns/web")
	if got := value(t, c.pending); got != 0 {
		t.Fatalf("pending = %v after Forget", got)
	}
}

func TestAChainOrdersNotifyBeforeAWaveAndApprovalAfter(t *testing.T) {
	m, _ := newModes(approval.Approve)
	wave := holder{name: "wave", reason: "wave"}
	res, err := gate.Chain{m.Notify(), wave, m.Approve()}.Check(context.Background(), changed(nil).Due())
	if err != nil {
		t.Fatal(err)
	}
	if res.Held == nil || res.Held.Gate != "wave" || len(res.Notices) != 0 {
		t.Fatalf("approve behind a wave: %+v, want the wave's hold and no pending notice", res)
	}
	n, _ := newModes(approval.Notify)
	res, err = gate.Chain{n.Notify(), wave, n.Approve()}.Check(context.Background(), changed(nil).Due())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Notify || res.Held != nil {
		t.Fatalf("notify before a wave: %+v, want notify", res)
	}
}

type holder struct{ name, reason string }

func (h holder) Name() string { return h.name }
func (h holder) Check(_ context.Context, d gate.Due) (gate.Verdict, error) {
	if d.Notify || len(d.Changes) == 0 {
		return gate.Verdict{}, nil
	}
	return gate.Verdict{Hold: reload.Hold{Reason: h.reason}}, nil
}

// The plugin approves workloads only: a generic target's hint is the annotation to write.
func TestApprovalHintOfAGenericTargetIsTheAnnotation(t *testing.T) {
	m, _ := newModes(approval.Approve)
	d := changed(nil).Kind("Dashboard.grafana.integreatly.org").Due()
	v := check(t, m.Approve(), d)
	want := "kubectl annotate dashboard.grafana.integreatly.org/web -n ns " + approval.ApprovedAnnotation + "=" + approval.Digest(d.Changes)
	if !strings.Contains(v.Hold.Why, want) || strings.Contains(v.Hold.Why, "kubectl reloader approve") {
		t.Fatalf("why %q; want the annotation %q, not the plugin", v.Hold.Why, want)
	}
}
