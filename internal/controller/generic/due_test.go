package generic_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/app"
	"github.com/reloader-operator/reloader/internal/approval"
	"github.com/reloader-operator/reloader/internal/controller/generic"
	"github.com/reloader-operator/reloader/internal/flap"
	"github.com/reloader-operator/reloader/internal/gate"
	"github.com/reloader-operator/reloader/internal/gate/gatetest"
	"github.com/reloader-operator/reloader/internal/gate/mode"
	"github.com/reloader-operator/reloader/internal/gate/quarantine"
	"github.com/reloader-operator/reloader/internal/gate/wave"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/waves"
	"github.com/reloader-operator/reloader/internal/whatchanged"
	"github.com/reloader-operator/reloader/internal/workload"
)

const ns = "team"

// The generic targets' pipeline is the workloads': these tests build a generic target's Due
// and run it through the chain internal/app builds for every kind.

func config(change func(*v1alpha1.ReloaderConfig)) *v1alpha1.ReloaderConfig {
	cfg := &v1alpha1.ReloaderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rules"},
		Spec: v1alpha1.ReloaderConfigSpec{
			Sources: []v1alpha1.Source{{Kind: "ConfigMap", Name: "grafana-ini"}, {Kind: "Secret", Name: "missing"}},
			GenericTargets: []v1alpha1.GenericTarget{{APIVersion: "operator.reloader.test/v1beta1", Kind: "Dashboard",
				Name: "grafana", TemplatePath: "spec.deployment.spec.template"}},
		}}
	if change != nil {
		change(cfg)
	}
	return cfg
}

func target(annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion("operator.reloader.test/v1beta1")
	u.SetKind("Dashboard")
	u.SetNamespace(ns)
	u.SetName("grafana")
	u.SetUID("uid-grafana")
	u.SetAnnotations(annotations)
	return u
}

var (
	cmID  = source.ID{Kind: source.ConfigMap, Name: "grafana-ini"}
	secID = source.ID{Kind: source.Secret, Name: "missing"}
	due   = []reload.Change{{ID: cmID, Hash: "h2"}, {ID: secID, Hash: reload.Absent}}
)

// dueFor is the Due of the config's generic target, its ConfigMap annotated with cmAnn, the
// Secret missing; changed: the content differs from the record.
func dueFor(t *testing.T, cfg *v1alpha1.ReloaderConfig, obj client.Object, cmAnn map[string]string, changed bool) gate.Due {
	t.Helper()
	c := reloaderconfig.Compile(cfg)
	if len(c.Generic) != 1 || len(c.Errs) > 0 {
		t.Fatalf("compiled: %d targets, errors %v", len(c.Generic), c.Errs)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "grafana-ini", Annotations: cmAnn}}
	return generic.DueOf(cfg, c.Generic[0], obj, due, []client.Object{cm, nil}, changed, gatetest.Epoch)
}

func TestGenericDueOf(t *testing.T) {
	cfg := config(func(c *v1alpha1.ReloaderConfig) { c.Spec.Mode = "notify" })
	obj := target(nil)
	d := dueFor(t, cfg, obj, map[string]string{"team": "a"}, false)
	if d.Key != "generic/team/rules/Dashboard.operator.reloader.test/grafana" || d.Kind != "Dashboard.operator.reloader.test" {
		t.Errorf("key %q, kind %q", d.Key, d.Kind)
	}
	if d.Target != obj || !d.Live || d.DryRun || !d.Now.Equal(gatetest.Epoch) {
		t.Errorf("target %v, live %v, dry %v, now %v", d.Target, d.Live, d.DryRun, d.Now)
	}
	if d.Overrides.Mode != "notify" || d.Overrides.Config != "rules" {
		t.Errorf("overrides %+v, want the config's", d.Overrides)
	}
	if len(d.Changes) != 0 || d.Related != nil {
		t.Errorf("nothing due, yet changes %v, related %v", d.Changes, d.Related)
	}
	if s := d.Sources[cmID]; s.Object == nil || s.Hash != "h2" || s.Annotations["team"] != "a" {
		t.Errorf("the ConfigMap as the gates see it: %+v", s)
	}
	if s, ok := d.Sources[secID]; !ok || s.Object != nil || s.Hash != reload.Absent {
		t.Errorf("the missing Secret as the gates see it: %+v (present %v)", s, ok)
	}
	d = dueFor(t, cfg, obj, nil, true)
	if !reflect.DeepEqual(d.Changes, due) || d.Related == nil || d.Related.GetName() != "grafana-ini" {
		t.Errorf("due: changes %v, related %v", d.Changes, d.Related)
	}
	// A generic target of a workload kind is not taken for a workload.
	dep := config(func(c *v1alpha1.ReloaderConfig) {
		c.Spec.GenericTargets[0].APIVersion, c.Spec.GenericTargets[0].Kind = "apps/v1", "Deployment"
	})
	if d := dueFor(t, dep, obj, nil, true); d.Kind != "Deployment.apps" {
		t.Errorf("kind %q, want Deployment.apps", d.Kind)
	}
}

func check(t *testing.T, c gate.Chain, d gate.Due) gate.Result {
	t.Helper()
	res, err := c.Check(context.Background(), d)
	if err != nil {
		t.Fatalf("chain: %v", err)
	}
	return res
}

// flapped is a flap table in which the config's ConfigMap went back and forth until the
// breaker tripped.
func flapped(t *testing.T) *flap.Table {
	t.Helper()
	tb := flap.NewTable(flap.Limits{MaxChanges: 8, Window: 2 * time.Minute, Quiet: 5 * time.Minute}, 0)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "grafana-ini"}}
	at := gatetest.Epoch.Add(-time.Minute)
	for i := range 6 {
		at = at.Add(2 * time.Second)
		w := whatchanged.Writer{Manager: []string{"helm", "argocd"}[i%2], Operation: "Update", Time: at}
		quarantine.Observe(tb, source.ConfigMap, cm, []string{"A", "B"}[i%2], []string{"B", "A"}[i%2], w, at)
	}
	if _, ok := tb.Status(flap.Key{Namespace: ns, Kind: string(source.ConfigMap), Name: "grafana-ini"}, gatetest.Epoch); !ok {
		t.Fatal("the breaker did not trip")
	}
	return tb
}

func TestGenericDueThroughTheChain(t *testing.T) {
	digest := approval.Digest(due)
	closed := gatetest.Epoch.Add(2 * time.Hour)
	window := "daily " + closed.Format("15:04") + "-" + closed.Add(time.Minute).Format("15:04") + " UTC"
	for _, tc := range []struct {
		name    string
		conf    options.Config
		flaps   bool
		cfg     func(*v1alpha1.ReloaderConfig)
		ann     map[string]string
		changed bool
		// want: the gate that holds ("" none), notify, the notice said
		held, reason string
		notify       bool
		notice       string
		check        func(*testing.T, gate.Result)
	}{
		{name: "reload", changed: true},
		{name: "nothing due", conf: options.Config{Mode: approval.Approve}},
		{name: "config mode notify", cfg: func(c *v1alpha1.ReloaderConfig) { c.Spec.Mode = "notify" }, changed: true,
			notify: true, notice: mode.ReasonReloadNotified},
		{name: "target's mode annotation", ann: map[string]string{approval.ModeAnnotation: "notify"}, changed: true,
			notify: true, notice: mode.ReasonReloadNotified},
		{name: "--mode approve", conf: options.Config{Mode: approval.Approve}, changed: true,
			held: mode.ApproveName, reason: approval.HoldReason, notice: mode.ReasonApprovalPending,
			check: func(t *testing.T, r gate.Result) {
				if p := r.Annotate[approval.PendingAnnotation]; p == nil || *p != digest {
					t.Errorf("pending digest %v, want %s published on the target", p, digest)
				}
				if r.Requeue != mode.Poll {
					t.Errorf("requeue %v, want %v: an approval on an unwatched target is polled", r.Requeue, mode.Poll)
				}
			}},
		{name: "approved", conf: options.Config{Mode: approval.Approve}, ann: map[string]string{approval.ApprovedAnnotation: digest}, changed: true,
			check: func(t *testing.T, r gate.Result) {
				if v, ok := r.Spend[approval.ApprovedAnnotation]; !ok || v != nil {
					t.Errorf("spend %v, want the approval removed with the reload", r.Spend)
				}
			}},
		{name: "nothing due any more: the pending digest goes", conf: options.Config{Mode: approval.Approve},
			ann: map[string]string{approval.PendingAnnotation: digest},
			check: func(t *testing.T, r gate.Result) {
				if v, ok := r.Annotate[approval.PendingAnnotation]; !ok || v != nil {
					t.Errorf("annotate %v, want the pending digest removed", r.Annotate)
				}
			}},
		{name: "reload window", cfg: func(c *v1alpha1.ReloaderConfig) { c.Spec.ReloadWindow = window }, changed: true,
			held: "window", reason: reload.HoldReloadWindow, notice: "ReloadHeld"},
		{name: "min interval", conf: options.Config{Options: options.Options{MinReloadInterval: time.Hour}},
			ann: map[string]string{reload.LastReloadAnnotation: gatetest.Epoch.Add(-10 * time.Minute).Format(time.RFC3339)}, changed: true,
			held: "window", reason: reload.HoldMinInterval, notice: "ReloadHeld"},
		{name: "min interval passed: the reload's time is written with it", conf: options.Config{Options: options.Options{MinReloadInterval: time.Hour}},
			ann: map[string]string{reload.LastReloadAnnotation: gatetest.Epoch.Add(-2 * time.Hour).Format(time.RFC3339)}, changed: true,
			check: func(t *testing.T, r gate.Result) {
				if v := r.Spend[reload.LastReloadAnnotation]; v == nil || *v != gatetest.Epoch.Format(time.RFC3339) {
					t.Errorf("spend %v, want %s at %s", r.Spend, reload.LastReloadAnnotation, gatetest.Epoch)
				}
			}},
		{name: "quarantine", flaps: true, changed: true,
			held: quarantine.Name, reason: flap.HoldReason, notice: quarantine.ReasonSourceQuarantined},
		{name: "quarantine before notify", flaps: true, cfg: func(c *v1alpha1.ReloaderConfig) { c.Spec.Mode = "notify" }, changed: true,
			held: quarantine.Name, reason: flap.HoldReason, notice: quarantine.ReasonSourceQuarantined},
		{name: "notify before the window", cfg: func(c *v1alpha1.ReloaderConfig) { c.Spec.Mode, c.Spec.ReloadWindow = "notify", window }, changed: true,
			notify: true, notice: mode.ReasonReloadNotified},
		{name: "approval before the window", conf: options.Config{Mode: approval.Approve}, cfg: func(c *v1alpha1.ReloaderConfig) { c.Spec.ReloadWindow = window }, changed: true,
			held: mode.ApproveName, reason: approval.HoldReason, notice: mode.ReasonApprovalPending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var from app.GuardrailsFrom
			if tc.flaps {
				from.Flaps = flapped(t)
			}
			chain := app.Gates(app.NewGuardrails(tc.conf, from))
			res := check(t, chain, dueFor(t, config(tc.cfg), target(tc.ann), nil, tc.changed))
			held, reason := "", ""
			if res.Held != nil {
				held, reason = res.Held.Gate, res.Held.Reason
			}
			if held != tc.held || reason != tc.reason || res.Notify != tc.notify {
				t.Fatalf("held by %q (%q), notify %v; want %q (%q), %v", held, reason, res.Notify, tc.held, tc.reason, tc.notify)
			}
			var said []string
			for _, n := range res.Notices {
				said = append(said, n.Reason)
				if n.Reason == tc.notice && !strings.Contains(n.Message, "Dashboard.operator.reloader.test grafana") {
					t.Errorf("notice %q does not name the target: %s", n.Reason, n.Message)
				}
			}
			if tc.notice != "" && !slices.Contains(said, tc.notice) {
				t.Errorf("notices %v, want %s", said, tc.notice)
			}
			if len(res.Invalid) > 0 {
				t.Errorf("invalid: %v", res.Invalid)
			}
			if tc.check != nil {
				tc.check(t, res)
			}
		})
	}
}

// cluster is one Deployment, db, that has not applied the source's content yet.
type cluster struct{}

func (cluster) Kinds() []workload.Kind { return []workload.Kind{workload.Deployment()} }

func (cluster) Affected(_ context.Context, kind workload.Kind, ns string, _ source.ID, _, _ map[string]string) []client.Object {
	return []client.Object{&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}}}
}

func (cluster) Content(_ source.ID, _ client.Object) (string, bool) { return "content-2", true }

func (cluster) Applied(context.Context, workload.Kind, client.Object, source.ID) (bool, bool, error) {
	return false, true, nil
}

// Waves leave generic targets out: a Deployment after db waits for it, a generic target with
// the same settings does not.
func TestGenericTargetLeftOutOfWaves(t *testing.T) {
	chain := app.Gates(app.NewGuardrails(options.Config{}, app.GuardrailsFrom{Cluster: cluster{}}))
	after := map[string]string{waves.AfterAnnotation: "deployment/db"}
	cmAnn := map[string]string{waves.Annotation: "true"}

	workloadDue := gatetest.For(ns, "web", after).Changed(source.ConfigMap, "grafana-ini", "h2", cmAnn).Due()
	res := check(t, chain, workloadDue)
	if res.Held == nil || res.Held.Gate != wave.Name {
		t.Fatalf("a Deployment after db: held %+v, want held by the wave (the test's cluster is wrong)", res.Held)
	}

	cfg := config(func(c *v1alpha1.ReloaderConfig) { c.Spec.Waves = ptr(true) })
	res = check(t, chain, dueFor(t, cfg, target(after), cmAnn, true))
	if res.Held != nil || len(res.Settled) > 0 {
		t.Fatalf("a generic target: held %+v, settled %v; want neither", res.Held, res.Settled)
	}
}

func ptr[T any](v T) *T { return &v }
