package controller_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reloader-operator/reloader/internal/coalesce"
	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/report"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/workload"
)

// staleReads serves one object from a copy taken earlier, as a cache that has not yet heard
// of the newest version does; everything else, writes included, goes to the API server.
type staleReads struct {
	client.Client
	stale *appsv1.Deployment
}

func (s staleReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if d, ok := obj.(*appsv1.Deployment); ok && key == client.ObjectKeyFromObject(s.stale) {
		s.stale.DeepCopyInto(d)
		return nil
	}
	return s.Client.Get(ctx, key, obj, opts...)
}

// logLines captures a logger's lines; errors are marked "ERROR".
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, prefix+" "+args)
	}, funcr.Options{Verbosity: 1})
}

func (l *logLines) contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

func (l *logLines) errors() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.lines {
		if strings.Contains(s, `"error"`) && !strings.Contains(s, "newer version") {
			out = append(out, s)
		}
	}
	return out
}

// A reload planned from a stale copy meets a 409 from the API server: the reconcile ends
// without an error (so controller-runtime logs no "Reconciler error"), comes back shortly (later
// after each conflict in a row), counts as a conflict, and the retry from the newer copy
// reloads nothing twice.
func TestAConflictIsRetriedWithoutAnError(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	d := deployment(ns, "web", map[string]string{auto: "true"}, podSpec("cfg"))
	create(t, cm, d)
	m := metrics.New(prometheus.NewRegistry(), false)
	r := &controller.WorkloadReconciler{
		Client: k8s, Kind: workload.Deployment(), Reads: controller.Reads{Sources: []sourcecache.SourceType{sourcecache.ConfigMaps}},
		Settings: controller.Settings{Policy: reload.Policy{Keys: reload.DefaultKeys()}, Strategy: envVars(t)}, Window: coalesce.New(0),
		Report: report.New(&reasons{n: map[string]int{}}, m, nil), Now: time.Now,
	}
	var logs logLines
	ctx := log.IntoContext(context.Background(), logs.logger())
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(d)}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("first reconcile: %v", err)
	}
	stale := get(t, d).DeepCopy() // recorded
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
	// A newer version that the decision read (a status write would be none: the patch tests
	// what the decision read, not the resourceVersion).
	update(t, d, func(d *appsv1.Deployment) { d.Annotations["touched"] = "yes" })

	r.Client = staleReads{Client: k8s, stale: stale}
	res, err := r.Reconcile(ctx, req)
	if err != nil || res.RequeueAfter <= 0 || res.RequeueAfter > time.Second {
		t.Fatalf("reconcile from the stale copy: %+v, %v; want no error and a requeue within a second", res, err)
	}
	// A conflict again (the cache still stale): the retry waits longer, so a conflict that
	// persists is no hot loop.
	again, err := r.Reconcile(ctx, req)
	if err != nil || again.RequeueAfter <= res.RequeueAfter {
		t.Fatalf("second reconcile from the stale copy: %+v, %v; want no error and a requeue later than %v", again, err, res.RequeueAfter)
	}
	if logs.contains("conflictsInRow") {
		t.Errorf("two conflicts logged at info level: %q", logs.lines)
	}
	// A conflict that persists is told at info level, still without an error.
	n := 2
	for ; n < 10 && !logs.contains("conflictsInRow"); n++ {
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatalf("reconcile %d from the stale copy: %v", n+1, err)
		}
	}
	if !logs.contains("conflictsInRow") {
		t.Errorf("%d conflicts in a row, none told at info level", n)
	}
	var conflicts dto.Metric
	_ = m.Reconciles.WithLabelValues("Deployment", metrics.OutcomeConflict).Write(&conflicts)
	if got := conflicts.GetCounter().GetValue(); got != float64(n) {
		t.Errorf("%v reconciles counted as conflict, want %d", got, n)
	}
	if errs := logs.errors(); len(errs) > 0 {
		t.Errorf("error log lines for a conflict: %q", errs)
	}
	r.Client = k8s
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if v, _ := envOf(&get(t, d).Spec.Template, "app", cfgEnv); v == "" {
		t.Error("the retry from the newer copy did not reload")
	}
}

func envVars(t *testing.T) reload.Strategy {
	s, err := reload.NewStrategy(reload.StrategyEnvVars)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
