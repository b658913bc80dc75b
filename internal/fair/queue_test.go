package fair

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
)

func newTestQueue(t *testing.T) priorityqueue.PriorityQueue[string] {
	t.Helper()
	rl := workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, time.Second)
	q := NewQueue("", rl, tenantOf) // unnamed: no metrics registered
	t.Cleanup(q.ShutDown)
	return q
}

// drain takes n items, marking each done, and returns them in the order taken.
func drain(t *testing.T, q priorityqueue.PriorityQueue[string], n int) string {
	t.Helper()
	var got []string
	for range n {
		it, prio, shutdown := q.GetWithPriority()
		if shutdown {
			t.Fatal("queue shut down")
		}
		got = append(got, fmt.Sprintf("%s@%d", it, prio))
		q.Done(it)
	}
	return strings.Join(got, " ")
}

func prio(p int) *int { return &p }

func TestQueueOrder(t *testing.T) {
	low := prio(handler.LowPriority)
	type add struct {
		items []string
		prio  *int
	}
	for _, tc := range []struct {
		name string
		adds []add
		want string
	}{
		{"namespaces take turns", []add{{items: []string{"a/1", "a/2", "a/3", "b/1"}}}, "a/1@0 b/1@0 a/2@0 a/3@0"},
		{"a queued key is held once", []add{{items: []string{"a/1", "a/2", "a/1", "b/1", "b/1"}}}, "a/1@0 b/1@0 a/2@0"},
		{"higher priority first, turns within it",
			[]add{{items: []string{"a/1", "a/2"}, prio: low}, {items: []string{"b/1", "b/2", "c/1"}}},
			"b/1@0 c/1@0 b/2@0 a/1@-100 a/2@-100"},
		{"raised priority moves a key up",
			[]add{{items: []string{"a/1", "a/2", "b/1"}, prio: low}, {items: []string{"a/2"}}},
			"a/2@0 a/1@-100 b/1@-100"},
		{"a tenant's high priority does not hold back another's change",
			[]add{{items: []string{"a/1", "a/2", "a/3"}, prio: prio(100)}, {items: []string{"b/1"}}},
			"a/1@100 b/1@0 a/2@100 a/3@100"},
		{"a tenant's turn serves its highest priority first",
			[]add{{items: []string{"a/1", "b/1"}}, {items: []string{"a/2", "b/2"}, prio: prio(100)}},
			"a/2@100 b/2@100 a/1@0 b/1@0"},
		{"the start-up list waits for every tenant's changes",
			[]add{{items: []string{"a/1"}, prio: low}, {items: []string{"b/1", "b/2"}, prio: prio(100)}, {items: []string{"c/1"}}},
			"b/1@100 c/1@0 b/2@100 a/1@-100"},
		{"a lower priority asked again keeps the higher",
			[]add{{items: []string{"a/1", "b/1"}}, {items: []string{"a/1"}, prio: low}},
			"a/1@0 b/1@0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newTestQueue(t)
			for _, a := range tc.adds {
				q.AddWithOpts(priorityqueue.AddOpts{Priority: a.prio}, a.items...)
			}
			n := q.Len()
			if got := drain(t, q, n); got != tc.want {
				t.Errorf("order %q, want %q", got, tc.want)
			}
			if q.Len() != 0 {
				t.Errorf("%d left", q.Len())
			}
		})
	}
}

// A key added while a worker holds it is not handed to another worker; it comes back once
// the first is done, with the priority asked.
func TestQueueNeverHandsOutAKeyTwiceAtOnce(t *testing.T) {
	q := newTestQueue(t)
	q.Add("a/1")
	it, _ := q.Get()
	q.AddWithOpts(priorityqueue.AddOpts{Priority: prio(handler.LowPriority)}, "a/1")
	q.Add("b/1")
	if got := drain(t, q, 1); got != "b/1@0" {
		t.Fatalf("while a/1 is processed got %q, want b/1@0", got)
	}
	if q.Len() != 0 {
		t.Fatalf("a/1 queued while processed: Len %d", q.Len())
	}
	q.Done(it)
	if got := drain(t, q, 1); got != "a/1@-100" {
		t.Errorf("after Done got %q, want a/1@-100", got)
	}
}

// A plain add of a key that waits, delayed, at low priority (a first record waiting for its
// slot) goes in now at 0: a change is not queued behind the first records.
func TestQueuePlainAddOfADelayedLowKeyIsNotLow(t *testing.T) {
	q := newTestQueue(t)
	q.AddWithOpts(priorityqueue.AddOpts{After: time.Hour, Priority: prio(handler.LowPriority)}, "a/1")
	q.AddWithOpts(priorityqueue.AddOpts{Priority: prio(handler.LowPriority)}, "b/1")
	q.Add("a/1")
	if got := drain(t, q, 2); got != "a/1@0 b/1@-100" {
		t.Errorf("got %q, want a/1@0 b/1@-100", got)
	}
}

func TestQueueDelaysAndBacksOff(t *testing.T) {
	q := newTestQueue(t)
	q.AddAfter("a/late", 50*time.Millisecond)
	q.Add("b/now")
	start := time.Now()
	if got := drain(t, q, 2); got != "b/now@0 a/late@0" {
		t.Errorf("order %q", got)
	}
	if d := time.Since(start); d < 40*time.Millisecond {
		t.Errorf("AddAfter(50ms) came after %v", d)
	}
	for range 3 {
		q.AddRateLimited("a/1")
		drain(t, q, 1)
	}
	if n := q.NumRequeues("a/1"); n != 3 {
		t.Errorf("NumRequeues %d, want 3", n)
	}
	q.Forget("a/1")
	if n := q.NumRequeues("a/1"); n != 0 {
		t.Errorf("NumRequeues after Forget %d", n)
	}
	q.AddWithOpts(priorityqueue.AddOpts{RateLimited: true, Priority: prio(-100)}, "c/1")
	if got := drain(t, q, 1); got != "c/1@-100" {
		t.Errorf("rate-limited add with priority: %q", got)
	}
}

func TestQueueShutDown(t *testing.T) {
	q := newTestQueue(t)
	q.Add("a/1")
	q.ShutDown()
	q.Add("b/1") // refused once shutting down
	if !q.ShuttingDown() {
		t.Error("not shutting down")
	}
	// As in client-go: what was queued is still handed out, then Get reports shutdown.
	if it, _, shutdown := q.GetWithPriority(); shutdown || it != "a/1" {
		t.Errorf("first Get after ShutDown: %q, shutdown %v", it, shutdown)
	}
	if _, _, shutdown := q.GetWithPriority(); !shutdown {
		t.Error("Get of an empty queue after ShutDown did not report shutdown")
	}
}

// Many producers and workers at once (run with -race): every key is handed out, none to two
// workers at the same time, and the bookkeeping maps empty.
func TestQueueConcurrent(t *testing.T) {
	q := NewQueue("", workqueue.DefaultTypedControllerRateLimiter[string](), tenantOf)
	var busy sync.Map
	var handled atomic.Int64
	var workers, producers sync.WaitGroup
	for range 4 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for {
				it, _, shutdown := q.GetWithPriority()
				if shutdown {
					return
				}
				if _, dup := busy.LoadOrStore(it, true); dup {
					t.Errorf("%s handed to two workers", it)
				}
				busy.Delete(it)
				handled.Add(1)
				q.Done(it)
			}
		}()
	}
	for p := range 4 {
		producers.Add(1)
		go func() {
			defer producers.Done()
			for i := range 500 {
				k := fmt.Sprintf("ns%d/w%d", i%7, i%50)
				q.AddWithOpts(priorityqueue.AddOpts{Priority: prio(-p)}, k)
			}
		}()
	}
	producers.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for q.Len() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	q.ShutDownWithDrain()
	workers.Wait()
	o := q.(*queue[string]).order
	left := 0
	for _, b := range o.bands {
		left += len(b.levels) + b.turns.Len()
	}
	if handled.Load() == 0 || len(o.prio) != 0 || len(o.taken) != 0 || left != 0 {
		t.Errorf("handled %d; left prio %d taken %d levels and turns %d", handled.Load(), len(o.prio), len(o.taken), left)
	}
}
