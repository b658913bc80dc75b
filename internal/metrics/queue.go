package metrics

import (
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"

	"github.com/reloader-operator/reloader/internal/cachemem/shrink"
)

// Queues measures every controller's work queue for upstream's unlabelled series:
// reloader_workqueue_depth (items waiting, all queues together), reloader_workqueue_adds_total,
// reloader_workqueue_latency_seconds (from an item being ready to a worker taking it) and
// reloader_retries_total (rate-limited re-adds after a failed reconcile). controller-runtime's
// own per-controller workqueue_* series stay as they are.
type Queues struct {
	depth         *prometheus.Desc
	adds, retries prometheus.Counter
	latency       prometheus.Histogram
	mu            sync.Mutex
	live          map[interface{ Len() int }]struct{}
}

func newQueues(reg prometheus.Registerer) *Queues {
	return Register(reg, &Queues{
		depth: prometheus.NewDesc("reloader_workqueue_depth", "Items waiting in the work queues.", nil, nil),
		adds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "reloader_workqueue_adds_total",
			Help: "Items added to the work queues (retries not included).",
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "reloader_retries_total",
			Help: "Items re-added with backoff after a failed reconcile.",
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "reloader_workqueue_latency_seconds",
			Help:    "Time an item waits in a work queue, from being ready to being taken by a worker.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		live: map[interface{ Len() int }]struct{}{},
	})
}

// Describe implements prometheus.Collector.
func (qs *Queues) Describe(ch chan<- *prometheus.Desc) {
	ch <- qs.depth
	qs.adds.Describe(ch)
	qs.retries.Describe(ch)
	qs.latency.Describe(ch)
}

// Collect implements prometheus.Collector.
func (qs *Queues) Collect(ch chan<- prometheus.Metric) {
	qs.mu.Lock()
	depth := 0
	for q := range qs.live {
		depth += q.Len()
	}
	qs.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(qs.depth, prometheus.GaugeValue, float64(depth))
	qs.adds.Collect(ch)
	qs.retries.Collect(ch)
	qs.latency.Collect(ch)
}

// NewQueue is a controller's NewQueue option: controller-runtime's default queue, measured.
func NewQueue[T comparable](qs *Queues, log logr.Logger) func(string, workqueue.TypedRateLimiter[T]) workqueue.TypedRateLimitingInterface[T] {
	return func(name string, rl workqueue.TypedRateLimiter[T]) workqueue.TypedRateLimitingInterface[T] {
		return Measure(qs, priorityqueue.New(name, func(o *priorityqueue.Opts[T]) {
			o.RateLimiter = rl
			o.Log = log.WithValues("controller", name)
		}))
	}
}

// Measure returns q measured into qs.
func Measure[T comparable](qs *Queues, q priorityqueue.PriorityQueue[T]) priorityqueue.PriorityQueue[T] {
	m := &measuredQueue[T]{PriorityQueue: q, qs: qs, readyAt: map[T]time.Time{}}
	qs.mu.Lock()
	qs.live[m] = struct{}{}
	qs.mu.Unlock()
	return m
}

// measuredQueue passes every call on, noting adds and when each item became ready. It stays
// a PriorityQueue, so that controller-runtime keeps its priorities.
type measuredQueue[T comparable] struct {
	priorityqueue.PriorityQueue[T]
	qs      *Queues
	mu      sync.Mutex
	readyAt map[T]time.Time
}

func (q *measuredQueue[T]) Add(item T) {
	q.added(priorityqueue.AddOpts{}, item)
	q.PriorityQueue.Add(item)
}

func (q *measuredQueue[T]) AddAfter(item T, after time.Duration) {
	q.added(priorityqueue.AddOpts{After: after}, item)
	q.PriorityQueue.AddAfter(item, after)
}

func (q *measuredQueue[T]) AddRateLimited(item T) {
	q.added(priorityqueue.AddOpts{RateLimited: true}, item)
	q.PriorityQueue.AddRateLimited(item)
}

func (q *measuredQueue[T]) AddWithOpts(o priorityqueue.AddOpts, items ...T) {
	q.added(o, items...)
	q.PriorityQueue.AddWithOpts(o, items...)
}

func (q *measuredQueue[T]) Get() (T, bool) {
	item, shutdown := q.PriorityQueue.Get()
	if !shutdown {
		q.taken(item)
	}
	return item, shutdown
}

func (q *measuredQueue[T]) GetWithPriority() (T, int, bool) {
	item, priority, shutdown := q.PriorityQueue.GetWithPriority()
	if !shutdown {
		q.taken(item)
	}
	return item, priority, shutdown
}

func (q *measuredQueue[T]) ShutDown() {
	q.forget()
	q.PriorityQueue.ShutDown()
}

func (q *measuredQueue[T]) ShutDownWithDrain() {
	q.forget()
	q.PriorityQueue.ShutDownWithDrain()
}

// added notes items as ready from now (plus o.After; the earliest time wins, as in the
// queue). A rate-limited add is a retry, whose delay only the rate limiter knows.
func (q *measuredQueue[T]) added(o priorityqueue.AddOpts, items ...T) {
	if o.RateLimited {
		q.qs.retries.Add(float64(len(items)))
		return
	}
	q.qs.adds.Add(float64(len(items)))
	ready := time.Now().Add(o.After)
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, item := range items {
		if t, ok := q.readyAt[item]; !ok || ready.Before(t) {
			q.readyAt[item] = ready
		}
	}
}

func (q *measuredQueue[T]) taken(item T) {
	q.mu.Lock()
	t, ok := q.readyAt[item]
	shrink.Delete(&q.readyAt, item)
	q.mu.Unlock()
	if ok {
		q.qs.latency.Observe(max(time.Since(t), 0).Seconds())
	}
}

func (q *measuredQueue[T]) forget() {
	q.qs.mu.Lock()
	delete(q.qs.live, q)
	q.qs.mu.Unlock()
}
