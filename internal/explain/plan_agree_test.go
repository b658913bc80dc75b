package explain

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// TestPlanAgreesWithController: plan a change of a ConfigMap and a Secret, apply it, and the
// controller (running here) changes the pod templates of exactly the workloads the plan said
// it would, and of no other.
func TestPlanAgreesWithController(t *testing.T) {
	ns := "plan-agree"
	namespace(t, ns)
	conf := testConf(t, func(o *options.Options) {
		o.Namespaces = []string{ns}
		o.MetricsAddr = "0"
		o.CoalesceWindow = 100 * time.Millisecond
	})
	app := twoKeys(ns, "app", "1", "1")
	db := secret(ns, "db", "hunter2", nil)
	db.Data["user"] = []byte("admin")
	auto := map[string]string{"reloader.stakater.com/auto": "true"}
	deps := []*appsv1.Deployment{
		deployment(ns, "web", auto, podSpec([]string{"app"}, nil)),
		deployment(ns, "keyed", map[string]string{"reloader.stakater.com/auto": "true", reload.ConfigMapKeysAnnotation: "app/b"}, podSpec([]string{"app"}, nil)),
		deployment(ns, "excluded", map[string]string{"reloader.stakater.com/auto": "true",
			"configmaps.exclude.reloader.stakater.com/reload": "app"}, podSpec([]string{"app"}, []string{"db"})),
		pausedDeployment(ns, "paused", auto, podSpec([]string{"app"}, nil)),
		deployment(ns, "api", auto, podSpec(nil, []string{"db"})),
		deployment(ns, "users", map[string]string{"reloader.stakater.com/auto": "true", reload.SecretKeysAnnotation: "db/user"}, podSpec(nil, []string{"db"})),
		deployment(ns, "unannotated", nil, podSpec([]string{"app"}, nil)),
	}
	create(t, app, db)
	for _, d := range deps {
		create(t, d)
	}
	stop, _ := startReloader(t, conf)
	for _, d := range deps {
		if d.Annotations == nil {
			continue // nothing concerns it: no record
		}
		testutil.Eventually(t, "record on "+d.Name, func() error {
			if _, ok := get(t, d).Annotations[reload.RecordAnnotation]; !ok {
				return fmt.Errorf("no record on %s", d.Name)
			}
			return nil
		})
	}
	stop()

	newApp := twoKeys("", "app", "2", "1")
	newDB := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Data: map[string][]byte{"password": []byte("hunter3"), "user": []byte("admin")}}
	// The controller keeps its hash key in its first watched namespace; the plan reads it there.
	plan := makePlan(t, cluster.Config, conf, ns, ns, newApp, newDB)
	var rolls, templated []string
	for _, w := range plan.Workloads {
		if w.Rolls {
			rolls = append(rolls, w.Name)
		}
		if w.Rolls || w.Action == PlanPaused {
			templated = append(templated, w.Name)
		}
	}
	slices.Sort(rolls)
	slices.Sort(templated)
	// excluded leaves app out, but rolls for db.
	if fmt.Sprint(rolls) != "[api excluded web]" || fmt.Sprint(templated) != "[api excluded paused web]" {
		t.Fatalf("plan rolls %v, updates the templates of %v; want [api excluded web], and [api excluded paused web]", rolls, templated)
	}

	// Without the hash key, told from the content, the plan is the same.
	keyless := makePlan(t, cluster.Config, conf, ns, "nowhere", newApp, newDB)
	if len(keyless.Workloads) != len(plan.Workloads) {
		t.Fatalf("without the key, planned %+v; with it, %+v", keyless.Workloads, plan.Workloads)
	}
	for i, w := range keyless.Workloads {
		if want := plan.Workloads[i]; w.Name != want.Name || w.Rolls != want.Rolls || w.Action != want.Action {
			t.Errorf("without the key, %s planned as %+v; with it, %+v", w.Name, w, want)
		}
	}

	before := map[string]corev1.PodTemplateSpec{}
	for _, d := range deps {
		before[d.Name] = get(t, d).Spec.Template
	}
	ctx := context.Background()
	live := get(t, app)
	live.Data = newApp.Data
	testutil.Must(t, k8s.Update(ctx, live))
	liveDB := get(t, db)
	liveDB.Data = newDB.Data
	testutil.Must(t, k8s.Update(ctx, liveDB))
	_, decided := startReloader(t, conf)

	changed := func() []string {
		var out []string
		for _, d := range deps {
			if !equality.Semantic.DeepEqual(get(t, d).Spec.Template, before[d.Name]) {
				out = append(out, d.Name)
			}
		}
		slices.Sort(out)
		return out
	}
	testutil.Eventually(t, "the planned templates changed", func() error {
		if got := changed(); len(got) < len(templated) {
			return fmt.Errorf("templates changed: %v", got)
		}
		return nil
	})
	for _, d := range deps { // the changes were made before the start: each decided on them
		decided(d.Name)
	}
	if got := changed(); fmt.Sprint(got) != fmt.Sprint(templated) {
		t.Errorf("the controller changed the templates of %v; the plan said %v", got, templated)
	}
}

// TestPlanReadOnly: view's rights are enough, and the plan is the same as with every right.
func TestPlanReadOnly(t *testing.T) {
	ns := "plan-view"
	planShop(t, ns)
	conf := testConf(t)
	admin := makePlan(t, cluster.Config, conf, ns, "nowhere", twoKeys("", "app", "2", "1"))
	view := makePlan(t, viewOf(t, ns, "plan-viewer", workloadRules[4]), conf, ns, "nowhere", twoKeys("", "app", "2", "1"))
	for _, p := range []*Plan{admin, view} {
		p.Now = time.Time{}
		for i := range p.Workloads {
			p.Workloads[i].At = nil
		}
		p.Summary.First, p.Summary.Last = nil, nil
	}
	if !equality.Semantic.DeepEqual(admin.Workloads, view.Workloads) || admin.Summary != view.Summary {
		t.Errorf("as a viewer, planned\n%+v\nas admin\n%+v", view.Workloads, admin.Workloads)
	}
}
