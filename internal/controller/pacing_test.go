package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/app"
	"github.com/reloader-operator/reloader/internal/coalesce"
	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/report"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/testutil/follower"
	"github.com/reloader-operator/reloader/internal/workload"
)

// rollTimes watches the Deployments of ns and notes when each one's pod template changes,
// as the watch delivers it: the times pods roll.
func rollTimes(t *testing.T, ns string) func() map[string][]time.Time {
	t.Helper()
	f, read := watchRolls(t, ns)
	return func() map[string][]time.Time {
		f.CaughtUp(t)
		return read()
	}
}

// watchRolls is rollTimes with the watch's reading as it is (for the polls of a positive
// wait, which need not catch up), and its follower.
func watchRolls(t *testing.T, ns string) (*follower.Follower, func() map[string][]time.Time) {
	t.Helper()
	last, rolls := map[string]string{}, map[string][]time.Time{}
	// Every write counts: a roll missed while the watch was down has no time.
	f := followObjects(t, &appsv1.DeploymentList{}, follower.Config{Gaps: follower.GapNone}, func(_ watch.EventType, o client.Object) {
		d, ok := o.(*appsv1.Deployment)
		if !ok {
			return
		}
		b, _ := json.Marshal(d.Spec.Template)
		if prev, seen := last[d.Name]; seen && prev != string(b) {
			rolls[d.Name] = append(rolls[d.Name], time.Now())
		}
		last[d.Name] = string(b)
	}, client.InNamespace(ns))
	return f, func() map[string][]time.Time {
		f.Check(t)
		f.Lock()
		defer f.Unlock()
		out := make(map[string][]time.Time, len(rolls))
		for k, v := range rolls {
			out[k] = slices.Clone(v)
		}
		return out
	}
}

// heldEvents counts the ReloadHeld Events about name, series included.
func heldEvents(t *testing.T, ns, name string) int {
	t.Helper()
	var list eventsv1.EventList
	testutil.Must(t, k8s.List(context.Background(), &list, client.InNamespace(ns)))
	n := 0
	for _, e := range list.Items {
		if e.Regarding.Name != name || e.Reason != controller.ReasonReloadHeld {
			continue
		}
		n++
		if e.Series != nil {
			n += int(e.Series.Count) - 1
		}
	}
	return n
}

// A change to a ConfigMap used by 60 Deployments, at --reload-rate 20 and --reload-burst 5:
// five roll at once and the others one every 50 ms, (60-5)/20 = 2.75 s in all; unpaced, the
// 60 patches take a fraction of that. Each rolls once.
func TestReloadRateSpreadsAFanOut(t *testing.T) {
	const n, rate, burst = 60, 20, 5
	ns := newNamespace(t)
	create(t, configMap(ns, "cfg", map[string]string{"k": "v1"}))
	var ds []*appsv1.Deployment
	for i := range n {
		d := deployment(ns, fmt.Sprintf("web-%02d", i), map[string]string{auto: "true"}, podSpec("cfg"))
		create(t, d)
		ds = append(ds, d)
	}
	startReloader(t, ns, func(o *options.Options) { o.ReloadRate, o.ReloadBurst = rate, burst })
	for _, d := range ds {
		recorded(t, d)
	}
	idleControlPlane(t)
	time.Sleep(time.Duration(burst) * time.Second / rate) // the rate's burst refills after the first records
	rolls := rollTimes(t, ns)
	changed := time.Now()
	update(t, configMap(ns, "cfg", nil), func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
	testutil.Eventually(t, "every Deployment rolled", func() error {
		if got := len(rolls()); got < n {
			return fmt.Errorf("%d of %d rolled", got, n)
		}
		return nil
	})
	handledAll(t, objects(ds...), configMap(ns, "cfg", nil))
	var times []time.Time
	for name, ts := range rolls() {
		if len(ts) != 1 {
			t.Errorf("%s rolled %d times, want 1", name, len(ts))
		}
		times = append(times, ts[0])
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	spread := times[n-1].Sub(times[0])
	want := time.Duration(n-burst) * time.Second / rate
	inFirstSecond := 0
	for _, ts := range times {
		if ts.Sub(times[0]) < time.Second {
			inFirstSecond++
		}
	}
	t.Logf("first roll %v after the change, spread %v (paced: %v), %d in the first second", times[0].Sub(changed), spread, want, inFirstSecond)
	if spread < want*8/10 || spread > want+10*time.Second {
		t.Errorf("rolls spread over %v, want about %v", spread, want)
	}
	// burst + rate×1s, with room for a watch that delivers late.
	if inFirstSecond > burst+rate+5 {
		t.Errorf("%d rolled within a second of the first, want at most about %d", inFirstSecond, burst+rate)
	}
}

// min-reload-interval: a change within the interval since the last reload is held, announced
// once, and rolled when the interval ends with the content of that time; a new reloader
// reads the schedule from the workload and holds until the same time.
func TestMinReloadIntervalHoldsAcrossARestart(t *testing.T) {
	const interval = 6 * time.Second
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	d := deployment(ns, "web", map[string]string{auto: "true", reload.MinReloadIntervalAnnotation: interval.String()}, podSpec("cfg"))
	create(t, cm, d)
	stop := startReloader(t, ns)
	recorded(t, d)
	rolls := rollTimes(t, ns)

	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
	testutil.Eventually(t, "first reload", func() error {
		if len(rolls()["web"]) != 1 {
			return fmt.Errorf("rolls: %v", rolls()["web"])
		}
		return nil
	})
	lastReload, err := time.Parse(time.RFC3339, get(t, d).Annotations[reload.LastReloadAnnotation])
	testutil.Must(t, err)
	afterFirst, _ := envOf(&get(t, d).Spec.Template, "app", cfgEnv)

	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v3" })
	time.Sleep(300 * time.Millisecond) // the subject: two changes apart, past the coalescing window
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v4" })
	lastWrite := time.Now()
	eventuallyEvent(t, ns, "web", controller.ReasonReloadHeld)
	handled(t, d, cm)
	if n := heldEvents(t, ns, "web"); n != 1 {
		t.Errorf("%d ReloadHeld Events for one hold, want 1", n)
	}
	if got := len(rolls()["web"]); got != 1 {
		t.Fatalf("rolled %d times within the interval, want 1", got)
	}

	stop()
	startReloader(t, ns)
	testutil.Eventually(t, "second reload", func() error {
		if len(rolls()["web"]) != 2 {
			return fmt.Errorf("rolls: %v", rolls()["web"])
		}
		return nil
	})
	second := rolls()["web"][1]
	t.Logf("last reload %s, second roll %v after it", lastReload.Format(time.RFC3339), second.Sub(lastReload))
	if second.Before(lastReload.Add(interval)) {
		t.Errorf("the new reloader rolled at %v, before the interval ended at %v", second, lastReload.Add(interval))
	}
	if second.After(lastReload.Add(interval + 5*time.Second)) {
		t.Errorf("rolled %v after the interval ended", second.Sub(lastReload.Add(interval)))
	}
	if !second.After(lastWrite) {
		t.Errorf("rolled before the last write")
	}
	final, _ := envOf(&get(t, d).Spec.Template, "app", cfgEnv)
	rec, err := reload.ParseRecord(get(t, d).Annotations[reload.RecordAnnotation])
	testutil.Must(t, err)
	if final == afterFirst || !strings.Contains(rec.Encode(), final) {
		t.Errorf("after the hold the template has %s (was %s), record %s: want the latest content", final, afterFirst, rec.Encode())
	}
	handled(t, d, cm)
	if got := len(rolls()["web"]); got != 2 {
		t.Errorf("rolled %d times, want 2 (v2, then v3 and v4 together)", got)
	}
}

// value reads a gauge or counter.
func value(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	testutil.Must(t, c.Write(&m))
	return m.GetGauge().GetValue() + m.GetCounter().GetValue()
}

// notes keeps the Events a reconciler emits.
type notes struct {
	mu  sync.Mutex
	got []string // "Reason: note"
}

func (n *notes) Eventf(_, _ runtime.Object, _, reason, _, note string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.got = append(n.got, reason+": "+fmt.Sprintf(note, args...))
}

func (n *notes) AnnotatedEventf(obj, rel runtime.Object, _ map[string]string, typ, reason, action, note string, args ...any) {
	n.Eventf(obj, rel, typ, reason, action, note, args...)
}

func (n *notes) with(reason string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, g := range n.got {
		if strings.HasPrefix(g, reason+": ") {
			out = append(out, g)
		}
	}
	return out
}

// A reload window that opens three seconds ahead (the reconciler's clock is set so): the
// change is held, with no write at all, announced once, and rolled when the window opens. A
// window that can't be read is reported and does not hold.
func TestReloadWindowHoldsUntilItOpens(t *testing.T) {
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	// The clock reads three seconds before the next 03:00 UTC.
	now := time.Now()
	opens := time.Date(now.Year(), now.Month(), now.Day(), 3, 0, 0, 0, time.UTC)
	if !opens.After(now) {
		opens = opens.AddDate(0, 0, 1)
	}
	offset := opens.Add(-3 * time.Second).Sub(now)
	clock := func() time.Time { return time.Now().Add(offset) }
	// A pause period starts only when the held reload rolls: a held reload is no reload.
	d := deployment(ns, "web", map[string]string{auto: "true", reload.ReloadWindowAnnotation: "daily 03:00-04:00 UTC",
		"deployment.reloader.stakater.com/pause-period": "1h"}, podSpec("cfg"))
	bad := deployment(ns, "bad", map[string]string{auto: "true", reload.ReloadWindowAnnotation: "weekdays 3am-4am"}, podSpec("cfg"))
	create(t, cm, d, bad)
	events := &notes{}
	r := &controller.WorkloadReconciler{
		Client: k8s, Kind: workload.Deployment(), Reads: controller.Reads{Sources: []sourcecache.SourceType{sourcecache.ConfigMaps}},
		Settings: controller.Settings{Policy: reload.Policy{Keys: reload.DefaultKeys()}, Strategy: reload.EnvVars{}}, Window: coalesce.New(0),
		Report: report.New(events, metrics.New(prometheus.NewRegistry(), false), nil), Now: clock,
	}
	r.Gates = app.Gates(app.NewGuardrails(options.Config{}, app.GuardrailsFrom{}))
	ctx := context.Background()
	for _, w := range []*appsv1.Deployment{d, bad} {
		if _, outcome, err := r.ReconcileCopyResult(ctx, get(t, w)); err != nil || outcome != metrics.OutcomeRecorded {
			t.Fatalf("first reconcile of %s: %s, %v", w.Name, outcome, err)
		}
	}
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })

	if _, outcome, err := r.ReconcileCopyResult(ctx, get(t, bad)); err != nil || outcome != metrics.OutcomeReloaded {
		t.Errorf("a workload with an unreadable window: %s, %v; want reloaded", outcome, err)
	}
	if got := events.with(controller.ReasonInvalidAnnotation); len(got) != 1 || !strings.Contains(got[0], reload.ReloadWindowAnnotation) || !strings.Contains(got[0], "HH:MM-HH:MM") {
		t.Errorf("InvalidAnnotation Events: %q; want one naming the annotation and the form", got)
	}

	before := get(t, d)
	var res, again struct {
		after   time.Duration
		outcome string
	}
	result, outcome, err := r.ReconcileCopyResult(ctx, before.DeepCopy())
	testutil.Must(t, err)
	res.after, res.outcome = result.RequeueAfter, outcome
	result, outcome, err = r.ReconcileCopyResult(ctx, get(t, d))
	testutil.Must(t, err)
	again.after, again.outcome = result.RequeueAfter, outcome
	if res.outcome != metrics.OutcomeHeld || res.after < 2*time.Second || res.after > 3*time.Second {
		t.Errorf("outside the window: %s, back after %v; want held, back in about 3s", res.outcome, res.after)
	}
	if again.outcome != metrics.OutcomeHeld {
		t.Errorf("again: %s, want held", again.outcome)
	}
	if after := get(t, d); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("a held reload wrote the workload (resourceVersion %s -> %s)", before.ResourceVersion, after.ResourceVersion)
	}
	if g, c := value(t, r.Report.Metrics.Waiting.WithLabelValues(reload.HoldReloadWindow)), value(t, r.Report.Metrics.Held.WithLabelValues(reload.HoldReloadWindow)); g != 1 || c != 1 {
		t.Errorf("while held: reloads_waiting{reload-window} = %v, reloads_held_total = %v; want 1, 1", g, c)
	}
	held := events.with(controller.ReasonReloadHeld)
	wantNote := "held by reload window daily 03:00-04:00 UTC; reloads at " + opens.Format(time.RFC3339)
	if len(held) != 1 || !strings.Contains(held[0], wantNote) {
		t.Errorf("ReloadHeld Events: %q; want one saying %q", held, wantNote)
	}

	time.Sleep(res.after) // the subject: the window opens
	if _, outcome, err := r.ReconcileCopyResult(ctx, get(t, d)); err != nil || outcome != metrics.OutcomeReloaded {
		t.Fatalf("when the window opens: %s, %v; want reloaded", outcome, err)
	}
	if v, ok := envOf(&get(t, d).Spec.Template, "app", cfgEnv); !ok || v == "" {
		t.Errorf("no %s after the reload", cfgEnv)
	}
	if !get(t, d).Spec.Paused {
		t.Errorf("not paused by the reload that rolled when the window opened")
	}
	if g := value(t, r.Report.Metrics.Waiting.WithLabelValues(reload.HoldReloadWindow)); g != 0 {
		t.Errorf("after the reload: reloads_waiting{reload-window} = %v, want 0", g)
	}
	if n := len(events.with(controller.ReasonReloadHeld)); n != 1 {
		t.Errorf("%d ReloadHeld Events, want 1", n)
	}
}

// First records are paced: 60 new Deployments at --first-sight-rate 20 (burst 20) are
// recorded over (60-20)/20 = 2 s, not in one burst of 60 patches.
func TestFirstRecordsArePaced(t *testing.T) {
	const n, rate = 60, 20
	ns := newNamespace(t)
	create(t, configMap(ns, "cfg", map[string]string{"k": "v1"}))
	for i := range n {
		create(t, deployment(ns, fmt.Sprintf("web-%02d", i), map[string]string{auto: "true"}, podSpec("cfg")))
	}
	recordedAt := map[string]time.Time{}
	// Every write counts: one missed while the watch was down has no time.
	f := followObjects(t, &appsv1.DeploymentList{}, follower.Config{Gaps: follower.GapNone}, func(_ watch.EventType, o client.Object) {
		if _, ok := o.GetAnnotations()[reload.RecordAnnotation]; ok && recordedAt[o.GetName()].IsZero() {
			recordedAt[o.GetName()] = time.Now()
		}
	}, client.InNamespace(ns))
	idleControlPlane(t)
	startReloader(t, ns, func(o *options.Options) { o.FirstSightRate = rate })
	testutil.EventuallyWithin(t, 30*time.Second, "every Deployment recorded", func() error {
		f.Check(t)
		f.Lock()
		defer f.Unlock()
		if len(recordedAt) < n {
			return fmt.Errorf("%d of %d recorded", len(recordedAt), n)
		}
		return nil
	})
	f.Lock()
	defer f.Unlock()
	var times []time.Time
	for _, at := range recordedAt {
		times = append(times, at)
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	spread, want := times[n-1].Sub(times[0]), time.Duration(n-rate)*time.Second/rate
	t.Logf("%d first records spread over %v (paced: %v)", n, spread, want)
	if spread < want*8/10 || spread > want+10*time.Second {
		t.Errorf("first records spread over %v, want about %v", spread, want)
	}
}

// A ReloaderConfig's reloadWindow holds its targets as the annotation does: a change outside
// the window writes nothing and says when it will roll.
func TestReloaderConfigWindowHoldsItsTargets(t *testing.T) {
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	d := deployment(ns, "web", nil, podSpec("cfg"))
	opens := time.Now().UTC().Add(2 * time.Hour).Truncate(time.Minute)
	window := fmt.Sprintf("daily %s-%s UTC", opens.Format("15:04"), opens.Add(time.Minute).Format("15:04"))
	cfg := reloaderConfig(ns, "paced", []v1alpha1.Target{byName("Deployment", "web")}, sourceNamed("ConfigMap", "cfg"))
	cfg.Spec.ReloadWindow = window
	create(t, cm, d, cfg)
	startReloader(t, ns)
	recorded(t, d)
	rollouts := templateChanges(t, d)
	before := get(t, d)
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
	eventuallyEvent(t, ns, "web", controller.ReasonReloadHeld)
	handled(t, d, cm, cfg)
	if n := rollouts(); n != 0 {
		t.Errorf("rolled %d times outside the config's window", n)
	}
	if err := unwritten(t, before); err != nil {
		t.Errorf("the held workload was written: %v", err)
	}
	var list eventsv1.EventList
	testutil.Must(t, k8s.List(context.Background(), &list, client.InNamespace(ns)))
	want := "held by reload window " + window + "; reloads at " + opens.Format(time.RFC3339)
	found := false
	for _, e := range list.Items {
		found = found || (e.Reason == controller.ReasonReloadHeld && strings.Contains(e.Note, want))
	}
	if !found {
		t.Errorf("no ReloadHeld Event saying %q", want)
	}
}
