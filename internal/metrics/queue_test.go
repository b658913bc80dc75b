package metrics

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"

	"github.com/reloader-operator/reloader/internal/testutil"
)

// The queue wrapper feeds upstream's reloader_workqueue_* and reloader_retries_total while
// staying the priority queue controller-runtime expects.
func TestQueuesMeasureAddsDepthLatencyAndRetries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, false)
	newQueue := NewQueue[string](m.Queues, logr.Discard())
	q := newQueue("test", workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, time.Second))
	if _, ok := q.(priorityqueue.PriorityQueue[string]); !ok {
		t.Fatal("the measured queue is no longer a priority queue")
	}

	q.Add("a")
	q.Add("b")
	q.(priorityqueue.PriorityQueue[string]).AddWithOpts(priorityqueue.AddOpts{}, "c")
	waitDepth := func(want float64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			got := gauge(t, reg, "reloader_workqueue_depth")
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("depth %v, want %v", got, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitDepth(3)
	if got := counter(t, reg, "reloader_workqueue_adds_total"); got != 3 {
		t.Errorf("adds %v, want 3", got)
	}
	time.Sleep(20 * time.Millisecond)
	item, _ := q.Get()
	q.AddRateLimited(item)
	q.Done(item)
	if got := counter(t, reg, "reloader_retries_total"); got != 1 {
		t.Errorf("retries %v, want 1", got)
	}
	if n, sum := histogram(t, reg, "reloader_workqueue_latency_seconds"); n != 1 || sum < 0.02 {
		t.Errorf("latency observed %d times, sum %vs; want once, at least the 20 ms waited", n, sum)
	}
	waitDepth(3) // b, c, and a again after its backoff
	q.ShutDown()
	if got := gauge(t, reg, "reloader_workqueue_depth"); got != 0 {
		t.Errorf("a shut down queue still counts: depth %v", got)
	}
}

func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	testutil.Must(t, err)
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("%s not exposed", name)
	return 0
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	testutil.Must(t, err)
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("%s not exposed", name)
	return 0
}

func histogram(t *testing.T, reg *prometheus.Registry, name string) (uint64, float64) {
	t.Helper()
	families, err := reg.Gather()
	testutil.Must(t, err)
	for _, f := range families {
		if f.GetName() == name {
			h := f.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	t.Fatalf("%s not exposed", name)
	return 0, 0
}
