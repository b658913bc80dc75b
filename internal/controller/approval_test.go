package controller_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/app"
	"github.com/reloader-operator/reloader/internal/approval"
	"github.com/reloader-operator/reloader/internal/approve"
	"github.com/reloader-operator/reloader/internal/coalesce"
	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/explain"
	"github.com/reloader-operator/reloader/internal/lookup"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/report"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/workload"
)

// explainer explains the workloads of ns as `kubectl reloader approve` does: where nothing
// sets a mode, approve.
func explainer(t *testing.T, ns string) *explain.Explainer {
	t.Helper()
	opts := options.Default()
	opts.Namespaces, opts.Mode = []string{ns}, "approve"
	conf, err := options.Parse(opts)
	testutil.Must(t, err)
	e, err := explain.New(context.Background(), restConfig, conf, ns, ns)
	testutil.Must(t, err)
	return e
}

// pendingDigest waits until explain says that d waits for approval of a content other than
// not, and returns that content's digest.
func pendingDigest(t *testing.T, d *appsv1.Deployment, not string) explain.Next {
	t.Helper()
	var n explain.Next
	testutil.Eventually(t, "explain: "+d.Name+" waits for approval", func() error {
		w, err := explainer(t, d.Namespace).Workload(context.Background(), workload.Deployment(), d.Name)
		if err != nil {
			return err
		}
		if n = w.Next; n.Approval == "" || n.Approval == not {
			return fmt.Errorf("next: %+v", n)
		}
		return nil
	})
	return n
}

// approveNow runs what `kubectl reloader approve deployment/<name>` runs.
func approveNow(t *testing.T, d *appsv1.Deployment, want string) (approve.Approved, error) {
	t.Helper()
	return approve.Approve(context.Background(), k8s, workload.Deployment(), d.Namespace, d.Name, want, func(context.Context) (*explain.Explainer, error) {
		return explainer(t, d.Namespace), nil
	})
}

// eventNotes are the notes of the Events with reason about the workload name, each as many
// times as the Event series counted it.
func eventNotes(t *testing.T, ns, name, reason string) []string {
	t.Helper()
	var list eventsv1.EventList
	testutil.Must(t, k8s.List(context.Background(), &list, client.InNamespace(ns)))
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name != name || e.Reason != reason {
			continue
		}
		n := 1
		if e.Series != nil && e.Series.Count > 1 {
			n = int(e.Series.Count)
		}
		for range n {
			out = append(out, e.Note)
		}
	}
	return out
}

func pendingGauge(t *testing.T) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	testutil.Must(t, err)
	for _, f := range families {
		if f.GetName() == "reloader_reloads_pending_approval" {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return 0
}

// Mode approve (here from the workload's annotation) holds a change: the template is left
// as it was; explain, an Event and the gauge say what waits and since when. The approval
// rolls it exactly once and is spent in the same write.
func TestApproveModeHoldsUntilApproved(t *testing.T) {
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	d := deployment(ns, "web", map[string]string{auto: "true", approval.ModeAnnotation: "approve"}, podSpec("cfg"))
	create(t, cm, d)
	startReloader(t, ns)
	recorded(t, d)
	rolls := rollTimes(t, ns)
	gauge := pendingGauge(t)

	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
	eventuallyEvent(t, ns, "web", controller.ReasonApprovalPending)
	n := pendingDigest(t, d, "")
	// reloader publishes the full digest on the workload, for an approval without its key.
	testutil.Eventually(t, "the pending digest published", func() error {
		if v := get(t, d).Annotations[approval.PendingAnnotation]; v != n.Approval || len(v) != approval.DigestLen {
			return fmt.Errorf("%s = %q, want %s (%d hex digits)", approval.PendingAnnotation, v, n.Approval, approval.DigestLen)
		}
		return nil
	})
	handled(t, d, cm)
	if got := len(rolls()["web"]); got != 0 {
		t.Fatalf("web rolled %d times while waiting for approval", got)
	}
	if !strings.Contains(n.Why, "waiting for approval of "+n.Approval+" since ") || n.HeldBy != approval.HoldReason {
		t.Errorf("explain: %+v; want it waiting for approval of %s, since when", n, n.Approval)
	}
	var text bytes.Buffer
	w, err := explainer(t, ns).Workload(context.Background(), workload.Deployment(), "web")
	testutil.Must(t, err)
	testutil.Must(t, w.WriteText(&text))
	t.Logf("kubectl reloader explain deployment/web:\n%s", text.String())
	notes := eventNotes(t, ns, "web", controller.ReasonApprovalPending)
	t.Logf("ApprovalPending: %q", notes)
	if len(notes) != 1 || !strings.Contains(notes[0], n.Approval) || !strings.Contains(notes[0], "keys changed: k") {
		t.Errorf("ApprovalPending Events: %q; want one naming %s and the key k", notes, n.Approval)
	}
	if g := pendingGauge(t); g != gauge+1 {
		t.Errorf("reloader_reloads_pending_approval = %v while web waits, want %v", g, gauge+1)
	}

	a, err := approveNow(t, d, n.Approval)
	testutil.Must(t, err)
	t.Logf("approved %s (%v)", a.Digest, a.Sources)
	rolledOnce(t, rolls, d)
	if v, ok := get(t, d).Annotations[approval.ApprovedAnnotation]; ok {
		t.Errorf("the approval %q was not spent by the reload", v)
	}
	if v, ok := get(t, d).Annotations[approval.PendingAnnotation]; ok {
		t.Errorf("the pending digest %q stays after the approved reload", v)
	}
	if g := pendingGauge(t); g != gauge {
		t.Errorf("reloader_reloads_pending_approval = %v after the reload, want %v", g, gauge)
	}
	if _, err := approveNow(t, d, ""); !errors.Is(err, approve.ErrNothingPending) {
		t.Errorf("approve with nothing pending: %v; want %v", err, approve.ErrNothingPending)
	}
}

// A second change while a reload waits for approval is not rolled by the approval of the
// first content (given before or after it): the digest moved, and it needs its own approval.
// Here the mode is --mode's.
func TestApprovalOfAnOlderContentRollsNothing(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	d := deployment(ns, "web", map[string]string{auto: "true"}, podSpec("cfg"))
	create(t, cm, d)
	startReloader(t, ns, func(o *options.Options) { o.Mode = "approve" })
	recorded(t, d)
	rolls := rollTimes(t, ns)

	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
	first := pendingDigest(t, d, "")
	// The controller's own decision on the first content (explain tells it before the
	// controller's coalescing window closes).
	testutil.Eventually(t, "the first ApprovalPending Event", func() error {
		if notes := eventNotes(t, ns, "web", controller.ReasonApprovalPending); len(notes) != 1 || !strings.Contains(notes[0], first.Approval) {
			return fmt.Errorf("%q", notes)
		}
		return nil
	})
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v3" })
	second := pendingDigest(t, d, first.Approval)
	testutil.Eventually(t, "two ApprovalPending Events", func() error {
		if notes := eventNotes(t, ns, "web", controller.ReasonApprovalPending); len(notes) != 2 {
			return fmt.Errorf("%q", notes)
		}
		return nil
	})

	// The user reviewed the first content: approve refuses, the content changed.
	if _, err := approveNow(t, d, first.Approval); err == nil || !strings.Contains(err.Error(), "changed since") {
		t.Errorf("approve --digest %s of the older content: %v; want it refused", first.Approval, err)
	}
	// Written by hand anyway (or raced by the second change): nothing rolls.
	update(t, d, func(d *appsv1.Deployment) { d.Annotations[approval.ApprovedAnnotation] = first.Approval })
	handled(t, d)
	if got := len(rolls()["web"]); got != 0 {
		t.Fatalf("the approval of %s rolled web %d times; the pending content is %s", first.Approval, got, second.Approval)
	}
	if n := pendingDigest(t, d, first.Approval); n.Approval != second.Approval || !strings.Contains(n.Why, "names another content") {
		t.Errorf("explain after a stale approval: %+v; want waiting for %s, the approval said stale", n, second.Approval)
	}

	_, err := approveNow(t, d, second.Approval)
	testutil.Must(t, err)
	rolledOnce(t, rolls, d)
	rec, err := reload.ParseRecord(get(t, d).Annotations[reload.RecordAnnotation])
	testutil.Must(t, err)
	w, err := explainer(t, ns).Workload(context.Background(), workload.Deployment(), "web")
	testutil.Must(t, err)
	if w.Next.Action != explain.ActionNothing || len(rec) != 1 {
		t.Errorf("after the approved reload: record %v, next %+v; want the latest content recorded, nothing due", rec, w.Next)
	}
}

// Mode notify never patches the template: one ReloadNotified Event per content, naming the
// changed keys; the record advances, so a later switch to reload rolls no old content. The
// mode comes from the source here; the workload's bad mode annotation is reported and read
// as absent.
func TestNotifyModeNeverRolls(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1", "other": "x"})
	cm.Annotations = map[string]string{approval.ModeAnnotation: "notify"}
	d := deployment(ns, "web", map[string]string{auto: "true", approval.ModeAnnotation: "ask-first"}, podSpec("cfg"))
	create(t, cm, d)
	startReloader(t, ns)
	recorded(t, d)
	rolls := rollTimes(t, ns)
	before := get(t, d).Spec.Template

	for i, v := range []string{"v2", "v3"} {
		update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = v })
		testutil.Eventually(t, fmt.Sprintf("%d ReloadNotified Events", i+1), func() error {
			if notes := eventNotes(t, ns, "web", controller.ReasonReloadNotified); len(notes) != i+1 {
				return fmt.Errorf("%q", notes)
			}
			return nil
		})
		handled(t, d, cm)
	}
	notes := eventNotes(t, ns, "web", controller.ReasonReloadNotified)
	t.Logf("ReloadNotified: %q", notes)
	var text bytes.Buffer
	w, err := explainer(t, ns).Workload(context.Background(), workload.Deployment(), "web")
	testutil.Must(t, err)
	testutil.Must(t, w.WriteText(&text))
	t.Logf("kubectl reloader explain deployment/web (the last content notified):\n%s", text.String())
	if len(notes) != 2 {
		t.Errorf("%d ReloadNotified Events after two changes, want 2: %q", len(notes), notes)
	}
	for _, note := range notes {
		if !strings.Contains(note, "Would reload Deployment web after change of ConfigMap cfg (keys changed: k)") {
			t.Errorf("ReloadNotified note %q; want it to name the ConfigMap and the key k", note)
		}
	}
	if got := len(rolls()["web"]); got != 0 {
		t.Errorf("web rolled %d times in mode notify", got)
	}
	if after := get(t, d).Spec.Template; after.String() != before.String() {
		t.Errorf("the template changed in mode notify")
	}
	if bad := eventNotes(t, ns, "web", controller.ReasonInvalidAnnotation); len(bad) == 0 || !strings.Contains(bad[0], approval.ModeAnnotation) {
		t.Errorf("InvalidAnnotation Events %q; want one naming %s", bad, approval.ModeAnnotation)
	}

	// Switched to reload: the content notified is recorded, nothing rolls until a new one.
	update(t, d, func(d *appsv1.Deployment) { d.Annotations[approval.ModeAnnotation] = "reload" })
	handled(t, d)
	if got := len(rolls()["web"]); got != 0 {
		t.Fatalf("switching to reload rolled web %d times on the content already notified", got)
	}
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v4" })
	testutil.Eventually(t, "web rolled once in mode reload", func() error {
		if got := len(rolls()["web"]); got != 1 {
			return fmt.Errorf("%d rolls", got)
		}
		return nil
	})
	if n := len(eventNotes(t, ns, "web", controller.ReasonReloadNotified)); n != 2 {
		t.Errorf("%d ReloadNotified Events after the switch, want still 2", n)
	}
}

// A ReloaderConfig's mode applies to its targets where no annotation sets one; the workload's
// own annotation wins over it.
func TestReloaderConfigModeYieldsToTheAnnotation(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	d := deployment(ns, "web", map[string]string{auto: "true"}, podSpec("cfg"))
	cfg := reloaderConfig(ns, "careful", []v1alpha1.Target{byName("Deployment", "web")}, sourceNamed("ConfigMap", "cfg"))
	cfg.Spec.Mode = "approve"
	create(t, cm, d, cfg)
	startReloader(t, ns)
	recorded(t, d)
	rolls := rollTimes(t, ns)

	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
	eventuallyEvent(t, ns, "web", controller.ReasonApprovalPending)
	handled(t, d, cm)
	if got := len(rolls()["web"]); got != 0 {
		t.Fatalf("web rolled %d times under a ReloaderConfig of mode approve", got)
	}
	update(t, d, func(d *appsv1.Deployment) { d.Annotations[approval.ModeAnnotation] = "reload" })
	testutil.Eventually(t, "web rolled once in its own mode reload", func() error {
		if got := len(rolls()["web"]); got != 1 {
			return fmt.Errorf("%d rolls", got)
		}
		return nil
	})
}

// A workload read without watch (degraded mode) hears of no approval written on it: its held
// reload is decided again every 30 s, where a watched one waits for its event. One reconcile
// after the approval rolls it.
func TestApprovalPolledWithoutWatch(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	d := deployment(ns, "web", map[string]string{auto: "true"}, podSpec("cfg"))
	create(t, cm, d)
	reconciler := func(live bool) *controller.WorkloadReconciler {
		r := &controller.WorkloadReconciler{
			Client: k8s, Kind: workload.Deployment(), Reads: controller.Reads{Sources: []sourcecache.SourceType{sourcecache.ConfigMaps}},
			Settings: controller.Settings{Policy: reload.Policy{Keys: reload.DefaultKeys()}, Strategy: reload.EnvVars{}}, Window: coalesce.New(0),
			Report: report.New(&notes{}, metrics.New(prometheus.NewRegistry(), false), nil), Now: time.Now,
		}
		if live {
			r.Unwatched = &lookup.Unwatched{Kinds: map[string]bool{"Deployment": true}}
		}
		r.Gates = app.Gates(app.NewGuardrails(options.Config{Mode: approval.Approve}, app.GuardrailsFrom{}))
		return r
	}
	watched, live := reconciler(false), reconciler(true)
	ctx := context.Background()
	if _, outcome, err := watched.ReconcileCopyResult(ctx, get(t, d)); err != nil || outcome != metrics.OutcomeRecorded {
		t.Fatalf("first reconcile: %s, %v", outcome, err)
	}
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
	for _, tt := range []struct {
		name string
		r    *controller.WorkloadReconciler
		want time.Duration
	}{{"watched", watched, 0}, {"read without watch", live, 30 * time.Second}} {
		res, outcome, err := tt.r.ReconcileCopyResult(ctx, get(t, d))
		if err != nil || outcome != metrics.OutcomeHeld || res.RequeueAfter != tt.want {
			t.Errorf("%s: %s, back after %v, %v; want held, back after %v", tt.name, outcome, res.RequeueAfter, err, tt.want)
		}
	}
	// explain (which approve asks) has its coalescing window: pending once it has closed.
	testutil.Eventually(t, "the approval", func() error { _, err := approveNow(t, d, ""); return err })
	if _, outcome, err := live.ReconcileCopyResult(ctx, get(t, d)); err != nil || outcome != metrics.OutcomeReloaded {
		t.Errorf("after the approval: %s, %v; want reloaded", outcome, err)
	}
	if v, ok := get(t, d).Annotations[approval.ApprovedAnnotation]; ok {
		t.Errorf("the approval %q was not spent", v)
	}
}

// rolledOnce waits until d rolled, and checks that it rolled once, also once reloader has
// handled it as it is now.
func rolledOnce(t *testing.T, rolls func() map[string][]time.Time, d *appsv1.Deployment) {
	name := d.Name
	t.Helper()
	testutil.Eventually(t, name+" rolled once", func() error {
		if got := len(rolls()[name]); got != 1 {
			return fmt.Errorf("%d rolls", got)
		}
		return nil
	})
	handled(t, d)
	if got := len(rolls()[name]); got != 1 {
		t.Errorf("%s rolled %d times, want 1", name, got)
	}
}
