package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/controller/configstatus"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/testutil/follower"
)

// configStatus waits until the status of config name satisfies check.
func configStatus(t *testing.T, ns, name, what string, check func(*v1alpha1.ReloaderConfig) error) *v1alpha1.ReloaderConfig {
	t.Helper()
	cfg := &v1alpha1.ReloaderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	testutil.Eventually(t, name+": "+what, func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(cfg), cfg); err != nil {
			return err
		}
		if cfg.Status.ObservedGeneration != cfg.Generation {
			return fmt.Errorf("observedGeneration %d, generation %d", cfg.Status.ObservedGeneration, cfg.Generation)
		}
		return check(cfg)
	})
	return cfg
}

// condition checks that condition typ has status and reason, and that its message holds each
// of words.
func condition(typ string, status metav1.ConditionStatus, reason string, words ...string) func(*v1alpha1.ReloaderConfig) error {
	return func(cfg *v1alpha1.ReloaderConfig) error {
		c := apimeta.FindStatusCondition(cfg.Status.Conditions, typ)
		if c == nil {
			return fmt.Errorf("no %s condition in %+v", typ, cfg.Status.Conditions)
		}
		if c.Status != status || c.Reason != reason {
			return fmt.Errorf("%s is %s/%s (%q), want %s/%s", typ, c.Status, c.Reason, c.Message, status, reason)
		}
		for _, w := range words {
			if !strings.Contains(c.Message, w) {
				return fmt.Errorf("%s message %q does not say %q", typ, c.Message, w)
			}
		}
		return nil
	}
}

func ready(cfg *v1alpha1.ReloaderConfig) error {
	return condition(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonResolved)(cfg)
}

// statusReconciles is how many reconciles the status controller has run in this process.
func statusReconciles(t *testing.T) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	testutil.Must(t, err)
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == configstatus.ConfigStatusController {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// The status of a config through its life: resolved with counts and hashes; a reload shows
// on its target; a spec update is observed; it survives a restart of reloader; it stays
// still while nothing happens; deleting the config restarts nothing.
func TestReloaderConfigStatusLifecycle(t *testing.T) {
	ns := newNamespace(t)
	appConfig := configMap(ns, "app-config", map[string]string{"db": "a", "other": "x"})
	flags := configMap(ns, "flags", map[string]string{"f": "1"})
	flags.Labels = map[string]string{"tier": "config"}
	tpl := podSpec("app-config")
	d := deployment(ns, "web", nil, tpl)
	d.Labels = map[string]string{"team": "shop"}
	cfg := reloaderConfig(ns, "shop",
		[]v1alpha1.Target{byName("Deployment", "web"), bySelector("Deployment", map[string]string{"team": "shop"})},
		v1alpha1.Source{Kind: "ConfigMap", Name: "app-config", Keys: []string{"db"}},
		v1alpha1.Source{Kind: "ConfigMap", Selector: &v1alpha1.LabelSelector{MatchLabels: map[string]string{"tier": "config"}}})
	cfg.Spec.PausePeriod = &metav1.Duration{Duration: time.Hour}
	create(t, appConfig, flags, d, cfg)
	stop := startReloader(t, ns)
	recorded(t, d)

	got := configStatus(t, ns, "shop", "resolved", ready)
	if got.Status.TargetCount != 1 || got.Status.SourceCount != 2 || len(got.Status.Targets) != 1 || len(got.Status.Sources) != 2 {
		t.Fatalf("counts: %d targets %d sources, lists %+v %+v", got.Status.TargetCount, got.Status.SourceCount, got.Status.Targets, got.Status.Sources)
	}
	for _, s := range got.Status.Sources {
		if s.Kind != "ConfigMap" || s.Hash == "" {
			t.Errorf("source status %+v", s)
		}
	}
	if s := got.Status.Sources[0]; s.Name != "app-config" || len(s.Keys) != 1 || s.Keys[0] != "db" {
		t.Errorf("first source %+v, want app-config with keys [db]", s)
	}
	hashBefore := got.Status.Sources[0].Hash
	count := templateChanges(t, d)

	changeData(t, appConfig, "db", "b")
	got = configStatus(t, ns, "shop", "reload shown", func(c *v1alpha1.ReloaderConfig) error {
		if len(c.Status.Targets) != 1 || c.Status.Targets[0].LastReload == nil {
			return fmt.Errorf("targets %+v", c.Status.Targets)
		}
		if c.Status.Sources[0].Hash == hashBefore {
			return fmt.Errorf("source hash not updated: %s", hashBefore)
		}
		if c.Status.Targets[0].PausedUntil == nil {
			return fmt.Errorf("no pausedUntil on the paused target: %+v", c.Status.Targets[0])
		}
		return nil
	})
	last, target := got.Status.Targets[0].LastReload, got.Status.Targets[0]
	if last.Source != "configmap/app-config" || last.Hash != got.Status.Sources[0].Hash || got.Status.LastReloadTime == nil ||
		!got.Status.LastReloadTime.Equal(&last.Time) {
		t.Errorf("last reload %+v, lastReloadTime %v, source hash %s", last, got.Status.LastReloadTime, got.Status.Sources[0].Hash)
	}
	pausedAt, err := time.Parse(time.RFC3339, get(t, d).Annotations[reload.DefaultKeys().PausedAt])
	testutil.Must(t, err)
	if want := pausedAt.Add(time.Hour); !target.PausedUntil.Time.Equal(want) {
		t.Errorf("pausedUntil %v, want paused-at + 1h = %v", target.PausedUntil, want)
	}
	waitChanges(t, "the reload", count, 1, d, appConfig)
	// A key the config does not list changes neither the workload nor the hash shown.
	changeData(t, appConfig, "other", "y")
	waitChanges(t, "a change of another key", count, 1, d, appConfig)
	if h := get(t, got).Status.Sources[0].Hash; h != last.Hash {
		t.Errorf("hash of app-config's listed keys moved from %s to %s on a change of another key", last.Hash, h)
	}

	// Idle: no status write wakes the controller, and nothing else does. Idle from when its
	// count of reconciles (the last of them answering handled's pokes of web) stops moving.
	testutil.Settle(t, "the status controller", func() (string, error) { return fmt.Sprint(statusReconciles(t)), nil })
	before := statusReconciles(t)
	if before == 0 {
		t.Fatalf("no reconcile of %s counted: the metric is not read right", configstatus.ConfigStatusController)
	}
	time.Sleep(quietSpan) // the subject: a span in which nothing wakes the status controller
	if after := statusReconciles(t); after != before {
		t.Errorf("status controller reconciled %v times while idle", after-before)
	}

	// A restart forgets reloads in memory; the status keeps them.
	stop()
	update(t, got, func(c *v1alpha1.ReloaderConfig) { c.Spec.Targets = c.Spec.Targets[:1] })
	startReloader(t, ns)
	got = configStatus(t, ns, "shop", "spec update observed after a restart", ready)
	if l := got.Status.Targets[0].LastReload; l == nil || !l.Time.Equal(&last.Time) || l.Hash != last.Hash {
		t.Errorf("last reload after restart %+v, want %+v", l, last)
	}

	testutil.Must(t, k8s.Delete(context.Background(), got))
	waitChanges(t, "config deleted", count, 1, d, got)
}

// Each thing to fix shows as a Degraded reason naming it, and Ready follows once it is fixed:
// missing source and target, created later; a selector matching nothing; a missing key; a
// kind reloader does not reconcile; two configs that disagree.
func TestReloaderConfigStatusReasons(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	appConfig := configMap(ns, "app-config", map[string]string{"db": "a"})
	web := deployment(ns, "web", nil, podSpec("app-config"))
	envVars := reloaderConfig(ns, "a-env", []v1alpha1.Target{byName("Deployment", "web")}, sourceNamed("ConfigMap", "app-config"))
	envVars.Spec.Strategy = reload.StrategyEnvVars
	annotations := reloaderConfig(ns, "b-annotations", []v1alpha1.Target{byName("Deployment", "web")}, sourceNamed("ConfigMap", "app-config"))
	annotations.Spec.Strategy = reload.StrategyAnnotations
	create(t, appConfig, web,
		reloaderConfig(ns, "later", []v1alpha1.Target{byName("Deployment", "api")}, sourceNamed("ConfigMap", "api-config")),
		reloaderConfig(ns, "nomatch", []v1alpha1.Target{bySelector("StatefulSet", map[string]string{"app": "none"})}, sourceNamed("ConfigMap", "app-config")),
		reloaderConfig(ns, "keys", []v1alpha1.Target{byName("Deployment", "web")}, v1alpha1.Source{Kind: "ConfigMap", Name: "app-config", Keys: []string{"db", "url"}}),
		reloaderConfig(ns, "rollouts", []v1alpha1.Target{byName("Rollout", "web")}, sourceNamed("ConfigMap", "app-config")),
		envVars, annotations)
	startReloader(t, ns)

	configStatus(t, ns, "later", "source and target missing", func(c *v1alpha1.ReloaderConfig) error {
		if err := condition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonTargetMissing, "Deployment api does not exist")(c); err != nil {
			return err
		}
		return condition(v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonTargetMissing,
			"Deployment api does not exist", "ConfigMap api-config does not exist")(c)
	})
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("ReloaderConfig"))
	testutil.Must(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "later"}, u))
	if n, found, _ := unstructured.NestedInt64(u.Object, "status", "targetCount"); !found || n != 0 {
		t.Errorf("status.targetCount %d (stored: %v), want a stored 0 for kubectl's column", n, found)
	}
	configStatus(t, ns, "nomatch", "selector matches nothing", condition(v1alpha1.ConditionDegraded, metav1.ConditionTrue,
		v1alpha1.ReasonSelectorNoMatch, `no StatefulSet matches the selector "app=none"`))
	configStatus(t, ns, "keys", "missing key", condition(v1alpha1.ConditionReady, metav1.ConditionFalse,
		v1alpha1.ReasonKeyMissing, "ConfigMap app-config has no key url"))
	configStatus(t, ns, "rollouts", "kind not watched", condition(v1alpha1.ConditionDegraded, metav1.ConditionTrue,
		v1alpha1.ReasonKindNotWatched, "reloader does not reconcile Rollouts"))
	for _, name := range []string{"a-env", "b-annotations"} {
		configStatus(t, ns, name, "conflict", func(c *v1alpha1.ReloaderConfig) error {
			if err := ready(c); err != nil {
				return err // the rules still apply
			}
			return condition(v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonConflictingRules,
				"strategy is set differently by ReloaderConfigs a-env and b-annotations; a-env applies")(c)
		})
	}
	eventuallyEvent(t, ns, "later", v1alpha1.ReasonTargetMissing)

	create(t, configMap(ns, "api-config", map[string]string{"k": "v"}))
	configStatus(t, ns, "later", "source created", func(c *v1alpha1.ReloaderConfig) error {
		err := condition(v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonTargetMissing)(c)
		if err == nil && strings.Contains(apimeta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionDegraded).Message, "api-config") {
			return fmt.Errorf("still reports the created source: %+v", c.Status.Conditions)
		}
		return err
	})
	create(t, deployment(ns, "api", nil, podSpec()))
	got := configStatus(t, ns, "later", "target created", ready)
	if d := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionDegraded); d.Status != metav1.ConditionFalse {
		t.Errorf("Degraded %+v after every fix", d)
	}
	changeData(t, appConfig, "url", "u")
	configStatus(t, ns, "keys", "key added", ready)
	testutil.Must(t, k8s.Delete(context.Background(), annotations))
	configStatus(t, ns, "a-env", "conflict gone", condition(v1alpha1.ConditionDegraded, metav1.ConditionFalse, v1alpha1.ReasonResolved))
}

// `kubectl get reloaderconfigs` shows the CRD's printer columns: a Table request, as kubectl
// makes it, to the API server.
func TestReloaderConfigPrinterColumns(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	create(t, configMap(ns, "app-config", map[string]string{"db": "a"}), deployment(ns, "web", nil, podSpec("app-config")),
		reloaderConfig(ns, "shop", []v1alpha1.Target{byName("Deployment", "web")}, v1alpha1.Source{Kind: "ConfigMap", Auto: true}))
	startReloader(t, ns)
	configStatus(t, ns, "shop", "resolved", ready)

	table := getTable(t, ns)
	var names []string
	for _, c := range table.ColumnDefinitions {
		if c.Priority == 0 {
			names = append(names, c.Name)
		}
	}
	if got, want := strings.Join(names, ","), "Name,Ready,Targets,Sources,Held,Last Reload,Age"; got != want {
		t.Fatalf("columns %s, want %s", got, want)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("%d rows", len(table.Rows))
	}
	cells := table.Rows[0].Cells
	if cells[0] != "shop" || cells[1] != "True" || cells[2] != float64(1) || cells[3] != float64(1) || cells[4] != float64(0) || cells[5] != nil {
		t.Errorf("row %v, want shop True 1 1 0 <none>", cells)
	}
	t.Logf("kubectl get reloaderconfigs:\n%s", printTable(table))

	changeData(t, get(t, configMap(ns, "app-config", nil)), "db", "b")
	cfg := configStatus(t, ns, "shop", "reloaded", func(c *v1alpha1.ReloaderConfig) error {
		if c.Status.LastReloadTime == nil {
			return fmt.Errorf("no lastReloadTime")
		}
		return nil
	})
	table = getTable(t, ns)
	if last, ok := table.Rows[0].Cells[5].(string); !ok || last == "" {
		t.Errorf("Last Reload cell %v after a reload", table.Rows[0].Cells[5])
	}
	t.Logf("after a reload:\n%s", printTable(table))
	out, err := yaml.Marshal(cfg.Status)
	testutil.Must(t, err)
	t.Logf("status:\n%s", out)
}

// getTable lists the ReloaderConfigs of ns as kubectl get does: as a Table.
func getTable(t *testing.T, ns string) *metav1.Table {
	t.Helper()
	hc, err := rest.HTTPClientFor(restConfig)
	testutil.Must(t, err)
	u, err := url.JoinPath(restConfig.Host, "apis/reloader.dev/v1alpha1/namespaces", ns, "reloaderconfigs")
	testutil.Must(t, err)
	req, err := http.NewRequest(http.MethodGet, u, nil)
	testutil.Must(t, err)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	testutil.Must(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	testutil.Must(t, err)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("table request %s: %s: %s", u, resp.Status, body)
	}
	var table metav1.Table
	testutil.Must(t, json.Unmarshal(body, &table))
	return &table
}

// printTable lays a Table out as kubectl does, for the log.
func printTable(table *metav1.Table) string {
	var b strings.Builder
	for _, c := range table.ColumnDefinitions {
		if c.Priority == 0 {
			fmt.Fprintf(&b, "%-14s", strings.ToUpper(c.Name))
		}
	}
	for _, r := range table.Rows {
		b.WriteString("\n")
		for i, c := range table.ColumnDefinitions {
			if c.Priority != 0 {
				continue
			}
			v := r.Cells[i]
			if v == nil {
				v = "<none>"
			}
			fmt.Fprintf(&b, "%-14v", v)
		}
	}
	return b.String()
}

// The reloads one change makes of a config's targets are written into its status together:
// one status write, not one per target.
func TestReloaderConfigStatusWritesOncePerChange(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "shared", map[string]string{"k": "v1"})
	create(t, cm)
	const targets = 8
	for i := range targets {
		d := deployment(ns, fmt.Sprintf("web-%d", i), nil, podSpec("shared"))
		d.Labels = map[string]string{"group": "a"}
		create(t, d)
	}
	create(t, reloaderConfig(ns, "group", []v1alpha1.Target{bySelector("Deployment", map[string]string{"group": "a"})}, sourceNamed("ConfigMap", "shared")))
	startReloader(t, ns)
	configStatus(t, ns, "group", "resolved", func(c *v1alpha1.ReloaderConfig) error {
		if c.Status.TargetCount != targets {
			return fmt.Errorf("%d targets", c.Status.TargetCount)
		}
		return ready(c)
	})
	var ds []client.Object
	for i := range targets {
		ds = append(ds, deployment(ns, fmt.Sprintf("web-%d", i), nil, podSpec()))
	}
	handledAll(t, ds) // recorded: the writes of the start are over

	writes, reloaded := 0, 0
	// Every write counts: one missed while the watch was down fails the test.
	f := followObjects(t, &v1alpha1.ReloaderConfigList{}, follower.Config{Gaps: follower.GapNone}, func(typ watch.EventType, o client.Object) {
		c, ok := o.(*v1alpha1.ReloaderConfig)
		if !ok || typ != watch.Modified {
			return
		}
		writes++
		reloaded = 0
		for _, tgt := range c.Status.Targets {
			if tgt.LastReload != nil {
				reloaded++
			}
		}
	}, client.InNamespace(ns))
	changeData(t, cm, "k", "v2")
	testutil.EventuallyWithin(t, 20*time.Second, "every target shows its reload", func() error {
		f.Check(t)
		f.Lock()
		defer f.Unlock()
		if reloaded < targets {
			return fmt.Errorf("%d of %d targets show their reload after %d status writes", reloaded, targets, writes)
		}
		return nil
	})
	f.Lock()
	defer f.Unlock()
	t.Logf("%d targets reloaded, %d status writes", targets, writes)
	if writes > 2 {
		t.Errorf("%d status writes for one change reloading %d targets, want 1 (2 if the reloads straddle the delay)", writes, targets)
	}
}

// A rollout that stalls after a reload by a config's source shows on the target's lastReload
// and degrades the config with RolloutStalled; the rules still resolve.
func TestReloaderConfigStatusShowsStalledRollout(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	d := deployment(ns, "web", nil, podSpec("cfg"))
	create(t, cm, d, reloaderConfig(ns, "web", []v1alpha1.Target{byName("Deployment", "web")}, sourceNamed("ConfigMap", "cfg")))
	startReloader(t, ns)
	recorded(t, d)
	configStatus(t, ns, "web", "resolved", ready)
	gen := reloadedGeneration(t, cm, d)

	setStatus(t, d, func(d *appsv1.Deployment) {
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: gen, Replicas: 2, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
				Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "web-5d4f" has timed out progressing.`}}}
	})
	got := configStatus(t, ns, "web", "stalled rollout", func(c *v1alpha1.ReloaderConfig) error {
		if err := ready(c); err != nil {
			return err
		}
		return condition(v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonRolloutStalled,
			"the rollout of Deployment web after its reload stalled", "ProgressDeadlineExceeded")(c)
	})
	if l := got.Status.Targets[0].LastReload; l == nil || l.Rollout != "Stalled" || !strings.Contains(l.RolloutReason, "ProgressDeadlineExceeded") {
		t.Errorf("last reload %+v", l)
	}
}

// A target whose due reload is held (here by a reload window that is closed) shows the hold
// in the status, and the Held column counts it; once the hold ends and the reload goes, both
// clear.
func TestReloaderConfigStatusShowsHeldTargets(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	start := time.Now().UTC().Add(2 * time.Hour)
	closed := fmt.Sprintf("daily %s-%s UTC", start.Format("15:04"), start.Add(time.Hour).Format("15:04"))
	d := deployment(ns, "web", map[string]string{reload.ReloadWindowAnnotation: closed}, podSpec("cfg"))
	create(t, cm, d, reloaderConfig(ns, "web", []v1alpha1.Target{byName("Deployment", "web")}, sourceNamed("ConfigMap", "cfg")))
	startReloader(t, ns)
	recorded(t, d)
	configStatus(t, ns, "web", "resolved", ready)

	cm.Data["k"] = "v2"
	testutil.Must(t, k8s.Update(context.Background(), cm))
	got := heldTarget(t, ns, "web", "the held target")
	if h := got.Status.Targets[0].Held; h.Reason != reload.HoldReloadWindow || !strings.Contains(h.Message, start.Format("15:04")) {
		t.Errorf("held %+v, want %s naming the window", h, reload.HoldReloadWindow)
	}
	t.Logf("kubectl get reloaderconfigs, while held:\n%s", printTable(getTable(t, ns)))
	out, err := yaml.Marshal(got.Status.Targets)
	testutil.Must(t, err)
	t.Logf("status.targets:\n%s", out)

	testutil.Must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(d), d))
	delete(d.Annotations, reload.ReloadWindowAnnotation)
	testutil.Must(t, k8s.Update(context.Background(), d))
	configStatus(t, ns, "web", "the hold cleared by the reload", func(c *v1alpha1.ReloaderConfig) error {
		if c.Status.HeldCount != 0 || len(c.Status.Targets) != 1 || c.Status.Targets[0].Held != nil || c.Status.Targets[0].LastReload == nil {
			return fmt.Errorf("heldCount %d, targets %+v", c.Status.HeldCount, c.Status.Targets)
		}
		return nil
	})
}

// A config in mode approve: its target's change waits for approval, and the status says so.
func TestReloaderConfigStatusShowsPendingApproval(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	d := deployment(ns, "web", nil, podSpec("cfg"))
	cfg := reloaderConfig(ns, "web", []v1alpha1.Target{byName("Deployment", "web")}, sourceNamed("ConfigMap", "cfg"))
	cfg.Spec.Mode = "approve"
	create(t, cm, d, cfg)
	startReloader(t, ns)
	recorded(t, d)
	configStatus(t, ns, "web", "resolved", ready)

	cm.Data["k"] = "v2"
	testutil.Must(t, k8s.Update(context.Background(), cm))
	got := heldTarget(t, ns, "web", "the target waiting for approval")
	if h := got.Status.Targets[0].Held; h.Reason != reload.HoldApproval {
		t.Errorf("held %+v, want %s", h, reload.HoldApproval)
	}
	t.Logf("status.targets[0].held: %+v", *got.Status.Targets[0].Held)
}

// heldTarget waits until config name's one target is held, and returns the config.
func heldTarget(t *testing.T, ns, name, what string) *v1alpha1.ReloaderConfig {
	t.Helper()
	return configStatus(t, ns, name, what, func(c *v1alpha1.ReloaderConfig) error {
		if c.Status.HeldCount != 1 || len(c.Status.Targets) != 1 || c.Status.Targets[0].Held == nil {
			return fmt.Errorf("heldCount %d, targets %+v", c.Status.HeldCount, c.Status.Targets)
		}
		return nil
	})
}
