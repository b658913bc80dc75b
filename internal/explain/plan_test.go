package explain

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/approval"
	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// fractional are the RFC 3339 times with fractions of a second that JSON prints.
var fractional = regexp.MustCompile(`<time>|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)

func makePlan(t *testing.T, cfg *rest.Config, conf options.Config, ns, keyNamespace string, proposed ...client.Object) *Plan {
	t.Helper()
	p, err := NewPlanner(context.Background(), cfg, conf, ns, keyNamespace, proposed)
	testutil.Must(t, err)
	plan, err := p.Plan(context.Background())
	testutil.Must(t, err)
	return plan
}

func planned(t *testing.T, plan *Plan, name string) PlannedWorkload {
	t.Helper()
	for _, w := range plan.Workloads {
		if w.Name == name {
			return w
		}
	}
	t.Fatalf("%s is not in the plan: %+v", name, plan.Workloads)
	return PlannedWorkload{}
}

func replicas(d *appsv1.Deployment, n int32) *appsv1.Deployment {
	d.Spec.Replicas = ptr.To(n)
	return d
}

// twoKeys is a ConfigMap with keys a and b.
func twoKeys(ns, name, a, b string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: configMap(ns, name, "").ObjectMeta, Data: map[string]string{"a": a, "b": b}}
}

// planShop: ConfigMap app (keys a, b) used by web (3 pods, rolls on a change of a), keyed
// (restricted to b), excluded, and paused (spec.paused), each recorded as reloader would have.
func planShop(t *testing.T, ns string) *corev1.ConfigMap {
	t.Helper()
	namespace(t, ns)
	app := twoKeys(ns, "app", "1", "1")
	create(t, app)
	rec := reload.Record{"configmap/app": hash.ConfigMap(app)}
	auto := map[string]string{"reloader.stakater.com/auto": "true"}
	keyed := map[string]string{"reloader.stakater.com/auto": "true", reload.ConfigMapKeysAnnotation: "app/b"}
	create(t,
		replicas(deployment(ns, "web", withRecord(auto, rec), podSpec([]string{"app"}, nil)), 3),
		replicas(deployment(ns, "keyed", withRecord(keyed, reload.Record{
			"configmap/app": hash.Subset(hash.ConfigMap(app), hash.ConfigMapKeys(app), []string{"b"})}), podSpec([]string{"app"}, nil)), 2),
		deployment(ns, "excluded", map[string]string{"reloader.stakater.com/auto": "true",
			"configmaps.exclude.reloader.stakater.com/reload": "app"}, podSpec([]string{"app"}, nil)),
		replicas(pausedDeployment(ns, "paused", withRecord(auto, rec), podSpec([]string{"app"}, nil)), 4),
		deployment(ns, "unrelated", auto, podSpec([]string{"other"}, nil)),
	)
	return app
}

// TestPlan: a change of key a rolls web (3 pods, now), and says why each other user of the
// ConfigMap does not roll; the same content rolls nothing.
func TestPlan(t *testing.T) {
	ns := "plan"
	planShop(t, ns)
	conf := testConf(t)
	plan := makePlan(t, cluster.Config, conf, ns, "nowhere", twoKeys("", "app", "2", "1"))

	if len(plan.Sources) != 1 || plan.Sources[0].Change != ChangeUpdate || strings.Join(plan.Sources[0].ChangedKeys, ",") != "a" {
		t.Errorf("sources %+v, want configmap/app updated in key a", plan.Sources)
	}
	if len(plan.Workloads) != 4 {
		t.Errorf("workloads %+v, want web, keyed, excluded and paused", plan.Workloads)
	}
	web := planned(t, plan, "web")
	if !web.Rolls || web.Action != PlanRoll || web.Pods != 3 || web.At == nil || !web.At.Equal(plan.Now) {
		t.Errorf("web planned as %+v, want it to roll its 3 pods now", web)
	}
	for name, want := range map[string]string{
		"keyed":    "only keys it does not use change (it uses b)",
		"excluded": string(reload.ReasonExcluded),
		"paused":   "is paused (spec.paused)",
	} {
		w := planned(t, plan, name)
		if w.Rolls || !strings.Contains(w.Reason, want) {
			t.Errorf("%s planned as %+v, want no roll because %q", name, w, want)
		}
	}
	if s := plan.Summary; s.Workloads != 1 || s.Pods != 3 || s.Namespaces != 1 || !plan.Rolls() {
		t.Errorf("summary %+v, want 1 workload, 3 pods, 1 namespace", s)
	}
	goldenPlan(t, "plan", plan)

	same := makePlan(t, cluster.Config, conf, ns, "nowhere", twoKeys("", "app", "1", "1"))
	if same.Rolls() || same.Sources[0].Change != ChangeNone || planned(t, same, "web").Reason != "configmap/app: the proposed content is the live content" {
		t.Errorf("the live content planned as %+v", same)
	}
}

// goldenPlan compares the text and JSON forms of a plan with testdata/name.golden and
// name.json.golden, times normalized; -update rewrites them.
func goldenPlan(t *testing.T, name string, plan *Plan) {
	t.Helper()
	golden(t, name, plan)
	js, err := json.MarshalIndent(plan, "", "  ")
	testutil.Must(t, err)
	got := js
	got = fractional.ReplaceAll(got, []byte("<time>"))
	path := filepath.Join("testdata", name+".json.golden")
	if *update {
		testutil.Must(t, os.WriteFile(path, append(got, '\n'), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	testutil.Must(t, err)
	if !bytes.Equal(append(got, '\n'), want) {
		t.Errorf("JSON of %s differs from %s (run with -update to accept):\n%s", name, path, got)
	}
}

// TestPlanPacing: with --reload-rate 2 and a burst of 1, three rolls take about one second;
// a reload window closed now holds one until it opens; a minimum interval holds another.
func TestPlanPacing(t *testing.T) {
	ns := "plan-paced"
	namespace(t, ns)
	cfg := configMap(ns, "cfg", "v1")
	create(t, cfg)
	rec := reload.Record{"configmap/cfg": hash.ConfigMap(cfg)}
	auto := map[string]string{"reloader.stakater.com/auto": "true"}
	lastReload := time.Now().Add(-10 * time.Minute).UTC().Truncate(time.Second)
	// A window of one minute that is closed now (unless the test runs in that minute).
	opens := time.Now().UTC().Add(2 * time.Hour).Truncate(time.Minute)
	window := "daily " + opens.Format("15:04") + "-" + opens.Add(time.Minute).Format("15:04") + " UTC"
	create(t,
		deployment(ns, "a", withRecord(auto, rec), podSpec([]string{"cfg"}, nil)),
		deployment(ns, "b", withRecord(auto, rec), podSpec([]string{"cfg"}, nil)),
		deployment(ns, "c", withRecord(auto, rec), podSpec([]string{"cfg"}, nil)),
		deployment(ns, "spaced", withRecord(map[string]string{"reloader.stakater.com/auto": "true",
			reload.MinReloadIntervalAnnotation: "1h", reload.LastReloadAnnotation: lastReload.Format(time.RFC3339)}, rec), podSpec([]string{"cfg"}, nil)),
		deployment(ns, "windowed", withRecord(map[string]string{"reloader.stakater.com/auto": "true",
			reload.ReloadWindowAnnotation: window}, rec), podSpec([]string{"cfg"}, nil)),
	)
	conf := testConf(t, func(o *options.Options) {
		o.ReloadRate, o.ReloadBurst = 2, 1
		o.CoalesceWindow = 300 * time.Millisecond
	})
	plan := makePlan(t, cluster.Config, conf, ns, "nowhere", configMap("", "cfg", "v2"))
	var buf bytes.Buffer
	testutil.Must(t, plan.WriteText(&buf))
	t.Logf("plan:\n%s", buf.String())

	if plan.Summary.Workloads != 5 {
		t.Fatalf("summary %+v, want 5 rolls", plan.Summary)
	}
	var ats []time.Duration
	for _, name := range []string{"a", "b", "c"} {
		w := planned(t, plan, name)
		if !w.Rolls || w.At == nil {
			t.Fatalf("%s planned as %+v", name, w)
		}
		ats = append(ats, w.At.Sub(plan.Now))
	}
	// The first after the coalescing window, the next two a token (500 ms) apart each.
	first, last := ats[0], ats[0]
	for _, d := range ats {
		first, last = min(first, d), max(last, d)
	}
	if first != 300*time.Millisecond || last < 1250*time.Millisecond || last > 1350*time.Millisecond {
		t.Errorf("a, b, c roll at %v after now; want the first at 300ms (the coalescing window), the last about 1.3s", ats)
	}
	if w := planned(t, plan, "spaced"); w.Action != PlanHeld || w.HeldBy != reload.HoldMinInterval || w.At.Before(lastReload.Add(time.Hour)) ||
		w.At.After(lastReload.Add(time.Hour+2*time.Second)) {
		t.Errorf("spaced planned as %+v, want held by the interval until %v", w, lastReload.Add(time.Hour))
	}
	if w := planned(t, plan, "windowed"); w.Action != PlanHeld || w.HeldBy != reload.HoldReloadWindow || w.At.Before(opens) || w.At.After(opens.Add(2*time.Second)) {
		t.Errorf("windowed planned as %+v, want held by the window until %v", w, opens)
	}
	if !strings.Contains(buf.String(), "5 workloads would roll, 5 pods, in 1 namespace; the last in") {
		t.Errorf("text summary missing:\n%s", buf.String())
	}
}

// TestPlanSecret: a Secret change is planned with reloader's hash key, and without it from the
// content itself; no value, in the clear or in base64, is ever printed.
func TestPlanSecret(t *testing.T) {
	ns, reloaderNS := "plan-secret", "plan-secret-reloader"
	namespace(t, ns)
	namespace(t, reloaderNS)
	key := keySecret(t, reloaderNS)
	db := secret(ns, "db", "hunter2", nil)
	db.Data["user"] = []byte("admin-name")
	create(t, db)
	auto := map[string]string{"reloader.stakater.com/auto": "true"}
	create(t,
		deployment(ns, "api", withRecord(auto, reload.Record{"secret/db": hash.Secret(key, db)}), podSpec(nil, []string{"db"})),
		deployment(ns, "users", withRecord(map[string]string{"reloader.stakater.com/auto": "true", reload.SecretKeysAnnotation: "db/user"},
			reload.Record{"secret/db": hash.Subset(hash.Secret(key, db), hash.SecretKeys(key, db), []string{"user"})}), podSpec(nil, []string{"db"})),
	)
	proposed := &corev1.Secret{ObjectMeta: db.ObjectMeta, StringData: map[string]string{"password": "correct-horse", "user": "admin-name"}}
	proposed.Namespace, proposed.ResourceVersion, proposed.UID = "", "", ""
	secrets := []string{"hunter2", "correct-horse", "admin-name"}
	for _, keyNS := range []string{reloaderNS, "nowhere"} {
		plan := makePlan(t, cluster.Config, testConf(t), ns, keyNS, proposed)
		if plan.Summary.Workloads != 1 || !planned(t, plan, "api").Rolls || planned(t, plan, "users").Rolls {
			t.Errorf("key in %s: planned %+v, want api to roll, users (key user, unchanged) not", keyNS, plan.Workloads)
		}
		if sc := plan.Sources[0]; sc.Change != ChangeUpdate || strings.Join(sc.ChangedKeys, ",") != "password" {
			t.Errorf("key in %s: source %+v, want password changed", keyNS, sc)
		}
		var text bytes.Buffer
		testutil.Must(t, plan.WriteText(&text))
		js, err := json.Marshal(plan)
		testutil.Must(t, err)
		for _, s := range secrets {
			for _, form := range []string{s, base64.StdEncoding.EncodeToString([]byte(s))} {
				if strings.Contains(text.String(), form) || strings.Contains(string(js), form) {
					t.Errorf("key in %s: the plan prints a Secret value (%q):\n%s\n%s", keyNS, form, text.String(), js)
				}
			}
		}
		if keyNS == "nowhere" && !strings.Contains(strings.Join(plan.Notes, " "), "told from its content") {
			t.Errorf("without the key, the notes do not say how the change was told: %v", plan.Notes)
		}
	}
}

// TestPlanCreate: a ConfigMap that does not exist yet rolls the workloads waiting for it only
// with --reload-on-create, and the plan says so.
func TestPlanCreate(t *testing.T) {
	ns := "plan-create"
	namespace(t, ns)
	create(t, deployment(ns, "waiting", withRecord(map[string]string{"configmap.reloader.stakater.com/reload": "fresh"},
		reload.Record{"configmap/fresh": reload.Absent}), podSpec(nil, nil)))
	off := makePlan(t, cluster.Config, testConf(t), ns, "nowhere", configMap("", "fresh", "v1"))
	if w := planned(t, off, "waiting"); off.Sources[0].Change != ChangeCreate || w.Rolls || !strings.Contains(w.Reason, "--reload-on-create is off") {
		t.Errorf("without --reload-on-create, planned as %+v, %+v", off.Sources, w)
	}
	on := makePlan(t, cluster.Config, testConf(t, func(o *options.Options) { o.ReloadOnCreate = true }), ns, "nowhere", configMap("", "fresh", "v1"))
	if w := planned(t, on, "waiting"); !w.Rolls || w.Reason != "configmap/fresh: created; "+string(reload.ReasonNamed) {
		t.Errorf("with --reload-on-create, planned as %+v", w)
	}
}

// TestPlanDecidesOnTheProposedMetadata: the annotations and labels of the file count as the
// controller will see them: an ignore annotation added rolls nothing, a label a
// ReloaderConfig selects brings in the workload it targets.
func TestPlanDecidesOnTheProposedMetadata(t *testing.T) {
	ns := "plan-meta"
	namespace(t, ns)
	cfg := configMap(ns, "cfg", "v1")
	cfg.Immutable = ptr.To(true)
	other := configMap(ns, "other", "v1")
	create(t, cfg, other)
	create(t,
		deployment(ns, "web", withRecord(map[string]string{"reloader.stakater.com/auto": "true"},
			reload.Record{"configmap/cfg": hash.ConfigMap(cfg)}), podSpec([]string{"cfg"}, nil)),
		deployment(ns, "worker", withRecord(nil, reload.Record{"configmap/other": hash.ConfigMap(other)}), podSpec([]string{"other"}, nil)),
		&v1alpha1.ReloaderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-a"},
			Spec: v1alpha1.ReloaderConfigSpec{
				Targets: []v1alpha1.Target{{Kind: "Deployment", Name: "worker"}},
				Sources: []v1alpha1.Source{{Kind: "ConfigMap", Selector: &v1alpha1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}}},
			}},
	)
	conf := testConf(t)

	ignored := configMap("", "cfg", "v2")
	ignored.Annotations = map[string]string{"reloader.stakater.com/ignore": "true"}
	plan := makePlan(t, cluster.Config, conf, ns, "nowhere", ignored)
	if w := planned(t, plan, "web"); w.Rolls || w.Reason != "configmap/cfg: "+string(reload.ReasonSourceIgnored) {
		t.Errorf("with the ignore annotation proposed, web planned as %+v", w)
	}
	if len(plan.Notes) != 1 || !strings.Contains(plan.Notes[0], "ConfigMap cfg is immutable") {
		t.Errorf("notes %q, want one that says cfg is immutable", plan.Notes)
	}

	labelled := configMap("", "cfg", "v2")
	labelled.Labels = map[string]string{"team": "a"}
	plan = makePlan(t, cluster.Config, conf, ns, "nowhere", labelled)
	if w := planned(t, plan, "web"); !w.Rolls {
		t.Errorf("web planned as %+v, want a roll", w)
	}
	// Newly selected, cfg is not on worker's record: the controller records it, rolls nothing.
	if w := planned(t, plan, "worker"); w.Rolls || !strings.Contains(w.Reason, "new to the workload's record") || fmt.Sprint(w.Sources) != "[configmap/cfg]" {
		t.Errorf("worker planned as %+v, want cfg to concern it, recorded without a roll", w)
	}
}

// TestPlanPendingIsNotThisChange: a live change the controller has not reloaded yet rolls
// whether or not the file is applied; the plan of that same content says so and rolls nothing.
func TestPlanPendingIsNotThisChange(t *testing.T) {
	ns := "plan-pending"
	namespace(t, ns)
	create(t, configMap(ns, "cfg", "v2"), deployment(ns, "web", withRecord(map[string]string{"reloader.stakater.com/auto": "true"},
		reload.Record{"configmap/cfg": hash.ConfigMap(configMap(ns, "cfg", "v1"))}), podSpec([]string{"cfg"}, nil)))
	plan := makePlan(t, cluster.Config, testConf(t), ns, "nowhere", configMap("", "cfg", "v2"))
	if w := planned(t, plan, "web"); w.Rolls || !strings.Contains(w.Reason, "whose reload is still due") {
		t.Errorf("the pending content planned as %+v", w)
	}
	if plan = makePlan(t, cluster.Config, testConf(t), ns, "nowhere", configMap("", "cfg", "v3")); !planned(t, plan, "web").Rolls {
		t.Errorf("new content over a pending change planned as %+v", plan.Workloads)
	}
}

// TestPlanModes: a workload in mode approve is held for approval and does not count as a
// roll (it rolls only when someone approves it); one in mode notify reports, nothing rolls.
func TestPlanModes(t *testing.T) {
	ns := "plan-modes"
	namespace(t, ns)
	cfg := configMap(ns, "cfg", "v1")
	create(t, cfg)
	rec := reload.Record{"configmap/cfg": hash.ConfigMap(cfg)}
	mode := func(m string) map[string]string {
		return withRecord(map[string]string{"reloader.stakater.com/auto": "true", approval.ModeAnnotation: m}, rec)
	}
	create(t,
		deployment(ns, "asks", mode("approve"), podSpec([]string{"cfg"}, nil)),
		deployment(ns, "tells", mode("notify"), podSpec([]string{"cfg"}, nil)),
		deployment(ns, "rolls", mode("reload"), podSpec([]string{"cfg"}, nil)),
	)
	plan := makePlan(t, cluster.Config, testConf(t), ns, "nowhere", configMap("", "cfg", "v2"))
	var buf bytes.Buffer
	testutil.Must(t, plan.WriteText(&buf))
	t.Logf("plan:\n%s", buf.String())
	if w := planned(t, plan, "asks"); w.Action != PlanHeld || w.Rolls || w.At != nil || w.HeldBy != approval.HoldReason || !strings.Contains(w.Reason, "waiting for approval of ") {
		t.Errorf("asks planned as %+v; want held for approval, not rolling", w)
	}
	if w := planned(t, plan, "tells"); w.Action != PlanNotify || w.Rolls {
		t.Errorf("tells planned as %+v; want notify", w)
	}
	if w := planned(t, plan, "rolls"); w.Action != PlanRoll || !w.Rolls {
		t.Errorf("rolls planned as %+v; want a roll", w)
	}
	if plan.Summary.Workloads != 1 {
		t.Errorf("summary %+v; want 1 roll", plan.Summary)
	}
}
