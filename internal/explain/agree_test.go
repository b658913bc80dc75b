package explain

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/app"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/workload"
)

// startReloader runs the controller in-process on ns until stop is called or the test ends.
// decided waits until a reconcile of Deployment name has ended with a decision (not a wait in
// the coalescing window): everything written before the start, it has seen.
func startReloader(t *testing.T, conf options.Config) (stop func(), decided func(name string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	conf.V2ProbeAddr = "" // many in-process reloaders: none takes upstream v2's probe port
	var mu sync.Mutex
	seen := map[string]bool{}
	mgr, err := app.New(ctx, cluster.Config, conf, logr.Discard(), func(p app.Parts) error {
		p.Metrics.Hook = func(r metrics.Reconcile) {
			if r.Kind == "Deployment" && r.Outcome != metrics.OutcomeWaiting && r.Outcome != metrics.OutcomeConflict {
				mu.Lock()
				seen[r.Name] = true
				mu.Unlock()
			}
		}
		return nil
	})
	testutil.Must(t, err)
	decided = func(name string) {
		t.Helper()
		testutil.Eventually(t, "a decided reconcile of "+name, func() error {
			mu.Lock()
			defer mu.Unlock()
			if !seen[name] {
				return fmt.Errorf("none yet")
			}
			return nil
		})
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			testutil.Must(t, <-done)
		}
	}
	t.Cleanup(stop)
	return stop, decided
}

func get[T client.Object](t *testing.T, obj T) T {
	t.Helper()
	testutil.Must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	return obj
}

// TestExplainAgreesWithController: the workload explain says will reload is reloaded by the
// controller, and the one it says nothing about (a change of a key it does not restrict
// itself to) is left alone.
func TestExplainAgreesWithController(t *testing.T) {
	ns := "agree"
	namespace(t, ns)
	conf := testConf(t, func(o *options.Options) {
		o.Namespaces = []string{ns}
		o.MetricsAddr = "0"
		o.CoalesceWindow = 100 * time.Millisecond
	})
	a, b := configMap(ns, "a", "v1"), configMap(ns, "b", "v1")
	b.Data["other"] = "v1"
	auto := map[string]string{"reloader.stakater.com/auto": "true"}
	will, wont := deployment(ns, "will", auto, podSpec([]string{"a"}, nil)), deployment(ns, "wont", auto, podSpec([]string{"b"}, nil))
	// wont reads b, but only key k counts: a change of b's other key reloads nothing.
	wont.Annotations = map[string]string{"reloader.stakater.com/auto": "true", reload.ConfigMapKeysAnnotation: "b/k"}
	create(t, a, b, will, wont)

	stop, _ := startReloader(t, conf)
	for _, d := range []*appsv1.Deployment{will, wont} {
		testutil.Eventually(t, "record on "+d.Name, func() error {
			if _, ok := get(t, d).Annotations[reload.RecordAnnotation]; !ok {
				return fmt.Errorf("no record on %s", d.Name)
			}
			return nil
		})
	}
	stop()
	a.Data["k"] = "v2"
	testutil.Must(t, k8s.Update(context.Background(), a))
	b.Data["other"] = "v2"
	testutil.Must(t, k8s.Update(context.Background(), b))
	before := map[string]corev1.PodTemplateSpec{"will": get(t, will).Spec.Template, "wont": get(t, wont).Spec.Template}
	// Past the coalescing window, as managed fields tell write times (to the second):
	// right after the change, explain rightly says the controller would still wait.
	time.Sleep(1100 * time.Millisecond)

	// The controller runs with the key in its first watched namespace; so does explain here.
	e := explainer(t, conf, ns, ns)
	ctx := context.Background()
	said := map[string]string{}
	for _, name := range []string{"will", "wont"} {
		w, err := e.Workload(ctx, workload.Deployment(), name)
		testutil.Must(t, err)
		said[name] = w.Next.Action
	}
	if said["will"] != ActionReload || said["wont"] != ActionNothing {
		t.Fatalf("explain said %v, want will: reload, wont: nothing", said)
	}
	if w, err := e.Workload(ctx, workload.Deployment(), "wont"); err != nil || len(w.Sources) != 1 || fmt.Sprint(w.Sources[0].Keys) != "[k]" {
		t.Errorf("wont explained as %+v (%v), want configmap b restricted to key k", w, err)
	}

	_, decided := startReloader(t, conf)
	testutil.Eventually(t, "will reloaded", func() error {
		if equality.Semantic.DeepEqual(get(t, will).Spec.Template, before["will"]) {
			return fmt.Errorf("template of will unchanged")
		}
		return nil
	})
	testutil.Eventually(t, "Reloaded event in explain", func() error {
		w, err := e.Workload(ctx, workload.Deployment(), "will")
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(w.Events, func(ev Event) bool { return ev.Reason == "Reloaded" }) {
			return fmt.Errorf("events %+v", w.Events)
		}
		if w.Next.Action != ActionNothing {
			return fmt.Errorf("after the reload, next %+v", w.Next)
		}
		golden(t, "agree-after-reload", w)
		return nil
	})
	decided("wont") // the changes were made before the start: it decided on them
	if !equality.Semantic.DeepEqual(get(t, wont).Spec.Template, before["wont"]) {
		t.Errorf("wont was reloaded although explain said nothing")
	}
}
