package lookup

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reloader-operator/reloader/internal/fair"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// The handler only queues; the workers map the objects held for each source: old and new of
// an update whose labels differ (each may concern other workloads), the latest of versions
// alike, and queue each workload found once.
func TestSourceMapperMapsEachVariantOnce(t *testing.T) {
	cm := func(ns, rv string, labels map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg", ResourceVersion: rv, Labels: labels}}
	}
	var mu sync.Mutex
	var mapped []string
	gate := make(chan struct{})
	m := NewSourceMapper("", func(_ context.Context, o client.Object) []Queued {
		<-gate
		mu.Lock()
		mapped = append(mapped, o.GetNamespace()+"@"+o.GetResourceVersion())
		mu.Unlock()
		// Every version concerns web; a labelled one also concerns api.
		reqs := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: "web"}}}
		if o.GetLabels()["team"] != "" {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: "api"}})
		}
		return Plain(reqs)
	})
	h := m.Events()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Queued before the workers start: nothing is mapped on the handler's goroutine.
	h.Update(ctx, event.UpdateEvent{ObjectOld: cm("a", "1", map[string]string{"team": "x"}), ObjectNew: cm("a", "2", nil)}, nil)
	h.Update(ctx, event.UpdateEvent{ObjectOld: cm("a", "2", nil), ObjectNew: cm("a", "3", nil)}, nil)
	h.Create(ctx, event.CreateEvent{Object: cm("b", "4", nil)}, nil)
	if q.Len() != 0 {
		t.Fatalf("%d workloads queued by the handler itself", q.Len())
	}
	if err := m.Source().Start(ctx, q); err != nil {
		t.Fatal(err)
	}
	close(gate)
	testutil.Eventually(t, "the workloads queued", func() error {
		if q.Len() < 3 {
			return fmt.Errorf("%d queued", q.Len())
		}
		return nil
	})
	var got []string
	for q.Len() > 0 {
		req, _ := q.Get()
		got = append(got, req.String())
		q.Done(req)
	}
	slices.Sort(got)
	if fmt.Sprint(got) != "[a/api a/web b/web]" {
		t.Errorf("queued %v, want a/api, a/web and b/web", got)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(mapped)
	// a@2 was replaced by a@3, alike; a@1 is labelled, so mapped apart.
	if fmt.Sprint(mapped) != "[a@1 a@3 b@4]" {
		t.Errorf("mapped %v, want a@1, a@3 and b@4", mapped)
	}
}

// Past mapVariants versions of one source, the latest replaces the last held.
func TestKeepVariantIsBounded(t *testing.T) {
	var objs []client.Object
	for i := range mapVariants + 2 {
		objs = keepVariant(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", ResourceVersion: fmt.Sprint(i),
			Labels: map[string]string{"v": fmt.Sprint(i)}}})
	}
	if len(objs) != mapVariants || objs[0].GetResourceVersion() != "0" || objs[mapVariants-1].GetResourceVersion() != fmt.Sprint(mapVariants+1) {
		var rvs []string
		for _, o := range objs {
			rvs = append(rvs, o.GetResourceVersion())
		}
		t.Errorf("held %v, want the first %d and the latest last", rvs, mapVariants-1)
	}
}

// A workload the mapping queues later (its coalescing window) is not in the queue before,
// comes after, at its priority; one queued at once is there at once; a resync goes in at once
// at low priority whatever the mapping says.
func TestQueuedLaterComesWhenAsked(t *testing.T) {
	prio := 100
	m := NewSourceMapper("", func(_ context.Context, o client.Object) []Queued {
		return []Queued{
			{Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: "later"}}, After: 300 * time.Millisecond, Priority: &prio},
			{Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: "now"}}},
		}
	})
	q := fair.NewQueue("later", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request](), func(r reconcile.Request) string { return r.Namespace })
	defer q.ShutDown()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := m.Source().Start(ctx, q); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "cfg", ResourceVersion: "1"}}
	begun := time.Now()
	m.Events().Create(ctx, event.CreateEvent{Object: cm}, nil)
	first, prioFirst, _ := q.GetWithPriority()
	q.Done(first)
	if first.Name != "now" || prioFirst != 0 {
		t.Errorf("first out: %v at priority %d, want now at 0", first, prioFirst)
	}
	second, prioSecond, _ := q.GetWithPriority()
	q.Done(second)
	if took := time.Since(begun); second.Name != "later" || prioSecond != prio || took < 300*time.Millisecond {
		t.Errorf("second out: %v at priority %d after %v, want later at %d after 300ms", second, prioSecond, took, prio)
	}
	// A resync (the same resourceVersion) queues both at once, low.
	m.Events().Update(ctx, event.UpdateEvent{ObjectOld: cm, ObjectNew: cm}, nil)
	testutil.Eventually(t, "the resync's workloads queued", func() error {
		if q.Len() < 2 {
			return fmt.Errorf("%d queued", q.Len())
		}
		return nil
	})
}
