package controller_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/api/v1alpha1"

	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/waves"
	"github.com/reloader-operator/reloader/internal/workload"
)

// No Deployment controller runs here: the tests write each Deployment's status themselves,
// complete or stalled, and so decide when a rollout ends.

// rolloutStatus writes d's status as its controller would for its current generation:
// complete, or stalled past its progress deadline.
func rolloutStatus(t *testing.T, d *appsv1.Deployment, stalled bool) {
	t.Helper()
	testutil.Must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(d), d))
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	if stalled {
		d.Status.UpdatedReplicas, d.Status.Replicas = 0, 1
		d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
			Reason: workload.ReasonProgressDeadlineExceeded, Message: "timed out progressing"}}
	}
	testutil.Must(t, k8s.Status().Update(context.Background(), d))
}

func rollCounts(rolls map[string][]time.Time, names ...string) string {
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s=%d", n, len(rolls[n])))
	}
	return strings.Join(parts, " ")
}

func wantRolls(t *testing.T, what string, rolls func() map[string][]time.Time, want map[string]int) {
	t.Helper()
	testutil.Eventually(t, what, func() error {
		got := rolls()
		for name, n := range want {
			if len(got[name]) != n {
				return fmt.Errorf("%s rolled %d times, want %d", name, len(got[name]), n)
			}
		}
		return nil
	})
}

// reloader.dev/after: web rolls once db has rolled and completed; a cycle (a after b, b after
// a) is refused with WavesCycle and both roll as without it; a bad reference is reported
// and ignored.
func TestWavesAfterOrderingAndCycles(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "A"})
	deps := map[string]*appsv1.Deployment{}
	for name, after := range map[string]string{"db": "", "web": "deployment/db", "a": "deploy/b", "b": "deployments/a", "x": "pod/zzz, deployment/Bad_Name"} {
		ann := map[string]string{auto: "true"}
		if after != "" {
			ann[waves.AfterAnnotation] = after
		}
		deps[name] = deployment(ns, name, ann, podSpec("cfg"))
	}
	create(t, cm)
	for _, d := range deps {
		create(t, d)
	}
	startReloader(t, ns)
	for _, d := range deps {
		recorded(t, d)
		rolloutStatus(t, d, false)
	}
	rolls := rollTimes(t, ns)

	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "B" })
	wantRolls(t, "db, a, b and x rolled", rolls, map[string]int{"db": 1, "a": 1, "b": 1, "x": 1})
	eventuallyEvent(t, ns, "a", controller.ReasonWavesCycle)
	eventuallyEvent(t, ns, "b", controller.ReasonWavesCycle)
	eventuallyEvent(t, ns, "x", controller.ReasonInvalidAnnotation)
	handled(t, deps["web"], cm)
	if got := rolls(); len(got["web"]) != 0 {
		t.Fatalf("web rolled before db completed: %s", rollCounts(got, "db", "web"))
	}
	rolloutStatus(t, deps["db"], false)
	wantRolls(t, "web rolled once db completed", rolls, map[string]int{"db": 1, "web": 1})
	handledAll(t, objects(slices.Collect(maps.Values(deps))...), cm)
	t.Logf("rolls: %s", rollCounts(rolls(), "db", "web", "a", "b", "x"))
	for name, n := range rolls() {
		if len(n) != 1 {
			t.Errorf("%s rolled %d times, want 1", name, len(n))
		}
	}
}

// An annotated source rolls in waves (here 5 workloads, s3 the canary: s3, then s0 s1, then
// s2 s4). The canary stalls: the rest are halted. A resume naming the content lets the next
// wave roll; an abort naming it records the content on the rest without a roll. A newer
// content starts again from the canary, the annotations left on the source notwithstanding.
func TestWavesHaltResumeAbort(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "shared", map[string]string{"k": "A"})
	cm.Annotations = map[string]string{waves.Annotation: "true"}
	names := []string{"s0", "s1", "s2", "s3", "s4"}
	deps := map[string]*appsv1.Deployment{}
	create(t, cm)
	alerts, url := collect(t)
	for _, name := range names {
		ann := map[string]string{auto: "true"}
		if name == "s3" {
			ann[waves.CanaryAnnotation] = "true"
		}
		deps[name] = deployment(ns, name, ann, podSpec("shared"))
		create(t, deps[name])
	}
	startReloader(t, ns, func(o *options.Options) {
		o.Alert = options.Alert{Enabled: true, Sink: "raw", WebhookURL: url}
	})
	for _, name := range names {
		recorded(t, deps[name])
		rolloutStatus(t, deps[name], false)
	}
	rolls := rollTimes(t, ns)
	annotate := func(key string) string {
		t.Helper()
		testutil.Must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(cm), cm))
		v := waves.Short(sourcecache.ConfigMaps.Hash(cm))
		update(t, cm, func(c *corev1.ConfigMap) { c.Annotations[key] = v })
		return v
	}

	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "B" })
	wantRolls(t, "the canary s3 rolled", rolls, map[string]int{"s3": 1})
	rolloutStatus(t, deps["s3"], true)
	for _, name := range []string{"s0", "s1", "s2", "s4"} {
		eventuallyEvent(t, ns, name, controller.ReasonWavesHalted)
	}
	if got := rolls(); len(got["s0"])+len(got["s1"])+len(got["s2"])+len(got["s4"]) != 0 {
		t.Fatalf("rolled while halted: %s", rollCounts(got, names...))
	}
	haltedAlerts := func() []string {
		var out []string
		for _, a := range alerts.all() {
			if strings.Contains(a, `"event":"waves-halted"`) {
				out = append(out, a)
			}
		}
		return out
	}
	testutil.Eventually(t, "a waves-halted alert", func() error {
		if got := haltedAlerts(); len(got) == 0 || !strings.Contains(got[0], "deployment/s3 stalled") {
			return fmt.Errorf("alerts %v, want one naming the stalled canary", got)
		}
		return nil
	})

	content := annotate(waves.ResumeAnnotation)
	wantRolls(t, "wave 2 (s0, s1) rolled on the resume", rolls, map[string]int{"s0": 1, "s1": 1, "s3": 1})
	handledAll(t, []client.Object{deps["s2"], deps["s4"]}, cm)
	if got := rolls(); len(got["s2"])+len(got["s4"]) != 0 {
		t.Fatalf("wave 3 rolled before wave 2 completed: %s", rollCounts(got, names...))
	}

	annotate(waves.AbortAnnotation)
	for _, name := range []string{"s2", "s4"} {
		eventuallyEvent(t, ns, name, controller.ReasonWavesAborted)
		testutil.Eventually(t, name+" records the aborted content", func() error {
			rec, err := reload.ParseRecord(get(t, deps[name]).GetAnnotations()[reload.RecordAnnotation])
			if err != nil || !waves.Matches(content, rec["configmap/shared"]) {
				return fmt.Errorf("record %v (%v), want configmap/shared at %s", rec, err, content)
			}
			return nil
		})
	}
	handledAll(t, []client.Object{deps["s2"], deps["s4"]}, cm)
	if got := rolls(); len(got["s2"])+len(got["s4"]) != 0 {
		t.Fatalf("the abort rolled: %s", rollCounts(got, names...))
	}

	// The fix: from the canary again, wave after wave.
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "C" })
	wantRolls(t, "the canary rolled on the fix", rolls, map[string]int{"s3": 2})
	handledAll(t, []client.Object{deps["s0"], deps["s2"]}, cm)
	if got := rolls(); len(got["s0"]) != 1 || len(got["s2"]) != 0 {
		t.Fatalf("the resume or abort left on the source applied to the fix: %s", rollCounts(got, names...))
	}
	rolloutStatus(t, deps["s3"], false)
	wantRolls(t, "wave 2 on the fix", rolls, map[string]int{"s0": 2, "s1": 2})
	rolloutStatus(t, deps["s0"], false)
	rolloutStatus(t, deps["s1"], false)
	wantRolls(t, "wave 3 on the fix", rolls, map[string]int{"s2": 1, "s4": 1})
	handledAll(t, objects(slices.Collect(maps.Values(deps))...), cm)
	t.Logf("rolls: %s", rollCounts(rolls(), names...))
	if got := haltedAlerts(); len(got) != 1 {
		t.Errorf("%d waves-halted alerts for the 4 workloads held on one content, want 1: %v", len(got), got)
	}
	wantRolls(t, "no more rolls", rolls, map[string]int{"s0": 2, "s1": 2, "s2": 1, "s3": 2, "s4": 1})
}

// A ReloaderConfig with spec.waves opts its targets in (the source carries no annotation): a
// stalled canary halts the others, and the config's status shows them held.
func TestWavesByReloaderConfig(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "shared", map[string]string{"k": "A"})
	names := []string{"c0", "c1", "c2"}
	deps := map[string]*appsv1.Deployment{}
	create(t, cm)
	for _, name := range names {
		ann := map[string]string{}
		if name == "c1" {
			ann[waves.CanaryAnnotation] = "true"
		}
		deps[name] = deployment(ns, name, ann, podSpec("shared"))
		create(t, deps[name])
	}
	cfg := reloaderConfig(ns, "staged", []v1alpha1.Target{byName("Deployment", "c0"), byName("Deployment", "c1"), byName("Deployment", "c2")},
		sourceNamed("ConfigMap", "shared"))
	cfg.Spec.Waves = ptr.To(true)
	create(t, cfg)
	startReloader(t, ns)
	for _, name := range names {
		recorded(t, deps[name])
		rolloutStatus(t, deps[name], false)
	}
	rolls := rollTimes(t, ns)

	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "B" })
	wantRolls(t, "the canary c1 rolled", rolls, map[string]int{"c1": 1})
	rolloutStatus(t, deps["c1"], true)
	for _, name := range []string{"c0", "c2"} {
		eventuallyEvent(t, ns, name, controller.ReasonWavesHalted)
	}
	// The status is written after the Events: before the halt, c0 and c2 were held too, waiting
	// for the canary to roll, so the count alone is reached early.
	got := configStatus(t, ns, "staged", "the halted targets held as halted", func(c *v1alpha1.ReloaderConfig) error {
		if c.Status.HeldCount != 2 {
			return fmt.Errorf("heldCount %d, targets %+v", c.Status.HeldCount, c.Status.Targets)
		}
		for _, tg := range c.Status.Targets {
			if tg.Name != "c1" && (tg.Held == nil || tg.Held.Reason != "waves-halted" || !strings.Contains(tg.Held.Message, "c1")) {
				return fmt.Errorf("%s held %+v, want waves-halted naming c1", tg.Name, tg.Held)
			}
		}
		return nil
	})
	if r := rolls(); len(r["c0"])+len(r["c2"]) != 0 {
		t.Errorf("rolled while halted: %s", rollCounts(r, names...))
	}
	for _, tg := range got.Status.Targets {
		if tg.Held != nil {
			t.Logf("status.targets %s held: %s: %s", tg.Name, tg.Held.Reason, tg.Held.Message)
		}
	}
}

// A ReloaderConfig target's after list orders as the annotation does: web rolls once db has
// rolled and completed.
func TestWavesAfterByReloaderConfig(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "A"})
	db, web := deployment(ns, "db", nil, podSpec("cfg")), deployment(ns, "web", nil, podSpec("cfg"))
	target := byName("Deployment", "web")
	target.After = []string{"deployment/db"}
	create(t, cm, db, web, reloaderConfig(ns, "order", []v1alpha1.Target{byName("Deployment", "db"), target}, sourceNamed("ConfigMap", "cfg")))
	startReloader(t, ns)
	for _, d := range []*appsv1.Deployment{db, web} {
		recorded(t, d)
		rolloutStatus(t, d, false)
	}
	rolls := rollTimes(t, ns)

	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "B" })
	wantRolls(t, "db rolled", rolls, map[string]int{"db": 1})
	handled(t, web, cm)
	if got := rolls(); len(got["web"]) != 0 {
		t.Fatalf("web rolled before db completed: %s", rollCounts(got, "db", "web"))
	}
	rolloutStatus(t, db, false)
	wantRolls(t, "web rolled once db completed", rolls, map[string]int{"db": 1, "web": 1})
}
