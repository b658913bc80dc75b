package controller_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/coalesce"
	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/report"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/workload"
)

// sourceReads counts the reads of ConfigMaps.
type sourceReads struct {
	client.Client
	n atomic.Int64
}

func (s *sourceReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.ConfigMap); ok {
		s.n.Add(1)
	}
	return s.Client.Get(ctx, key, obj, opts...)
}

func (s *sourceReads) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*corev1.ConfigMapList); ok {
		s.n.Add(1)
	}
	return s.Client.List(ctx, list, opts...)
}

// A reconcile of a recorded workload while the coalescing window holds a change of its
// sources waits for the window without reading them; once it closes, the reload is made.
func TestAWaitForTheWindowReadsNoSource(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	d := deployment(ns, "web", map[string]string{auto: "true"}, podSpec("cfg"))
	create(t, cm, d)
	now := time.Now()
	window := coalesce.New(time.Second)
	window.Now = func() time.Time { return now }
	reads := &sourceReads{Client: k8s}
	r := &controller.WorkloadReconciler{
		Client: reads, Kind: workload.Deployment(), Reads: controller.Reads{Sources: []sourcecache.SourceType{sourcecache.ConfigMaps}},
		Settings: controller.Settings{Policy: reload.Policy{Keys: reload.DefaultKeys()}, Strategy: envVars(t)}, Window: window,
		Report: report.New(&reasons{n: map[string]int{}}, metrics.New(prometheus.NewRegistry(), false), nil), Now: time.Now,
	}
	ctx := context.Background()
	if outcome, err := r.ReconcileCopy(ctx, get(t, d)); err != nil || outcome != metrics.OutcomeRecorded {
		t.Fatalf("first reconcile: %s, %v; want recorded", outcome, err)
	}
	if reads.n.Load() == 0 {
		t.Fatal("the first record read no ConfigMap: the count counts nothing")
	}
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
	window.Touch("Deployment/" + ns + "/web") // as the ConfigMap's mapping does
	reads.n.Store(0)

	res, outcome, err := r.ReconcileCopyResult(ctx, get(t, d))
	testutil.Must(t, err)
	if outcome != metrics.OutcomeWaiting || res.RequeueAfter != time.Second {
		t.Fatalf("reconcile within the window: %s, %+v; want waiting, back in 1s", outcome, res)
	}
	if n := reads.n.Load(); n != 0 {
		t.Errorf("the wait read ConfigMaps %d times, want none", n)
	}
	now = now.Add(time.Second)
	if outcome, err := r.ReconcileCopy(ctx, get(t, d)); err != nil || outcome != metrics.OutcomeReloaded {
		t.Fatalf("reconcile once the window closed: %s, %v; want reloaded", outcome, err)
	}
}
