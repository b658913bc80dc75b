package fair

import (
	"slices"
	"sync"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
)

// NewQueue returns a controller's work queue that takes turns between tenants: client-go's
// rate-limiting queue (dedup of queued items, no item processed twice at once, backoff,
// AddAfter, shutdown, workqueue_* metrics under name) over an order that serves the highest
// priority first and, within a priority, each tenant in turn, each tenant's items first in
// first out. It keeps controller-runtime's priorities (the initial list's items go after
// changes), as its default priority queue does.
func NewQueue[T comparable](name string, rl workqueue.TypedRateLimiter[T], tenant func(T) string) priorityqueue.PriorityQueue[T] {
	o := &order[T]{tenant: tenant, prio: map[T]int{}, want: map[T]int{}, taken: map[T]int{}}
	inner := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[T]{Name: name, Queue: o})
	delaying := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[T]{Name: name, Queue: inner})
	return &queue[T]{
		TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueueWithConfig(rl,
			workqueue.TypedRateLimitingQueueConfig[T]{Name: name, DelayingQueue: delaying}),
		order: o,
	}
}

type queue[T comparable] struct {
	workqueue.TypedRateLimitingInterface[T]
	order *order[T]
}

// AddWithOpts notes the priority, which the order reads when the item lands in it (now, or
// after its delay), then adds as controller-runtime's wrapper of plain queues does.
func (q *queue[T]) AddWithOpts(o priorityqueue.AddOpts, items ...T) {
	p := 0
	if o.Priority != nil {
		p = *o.Priority
	}
	for _, item := range items {
		q.order.wish(item, p)
		switch {
		case o.RateLimited:
			q.AddRateLimited(item)
		case o.After > 0:
			q.AddAfter(item, o.After)
		default:
			q.TypedRateLimitingInterface.Add(item)
		}
	}
}

// Add queues item now, at priority 0 as controller-runtime's handlers mean a plain add (or
// higher, if asked before). A priority asked for a delayed add of the same item does not
// become this add's: a change of a workload whose first record waits for its slot, at low
// priority, goes in at 0, not behind the first records.
func (q *queue[T]) Add(item T) {
	q.order.wish(item, 0)
	q.TypedRateLimitingInterface.Add(item)
}

func (q *queue[T]) Get() (T, bool) {
	item, _, shutdown := q.GetWithPriority()
	return item, shutdown
}

func (q *queue[T]) GetWithPriority() (T, int, bool) {
	item, shutdown := q.TypedRateLimitingInterface.Get()
	return item, q.order.took(item), shutdown
}

// order is client-go's workqueue.Queue: client-go calls Push, Pop, Touch and Len under its
// own lock; wish and took come from outside it, hence mu.
type order[T comparable] struct {
	tenant func(T) string
	mu     sync.Mutex
	levels []level[T] // by priority, highest first
	prio   map[T]int  // of each item held
	want   map[T]int  // priorities asked for items not in the order yet
	taken  map[T]int  // priorities of items popped, until their Get returns
}

type level[T comparable] struct {
	priority int
	rr       *RoundRobin[T]
}

// wish asks for item at priority p, the highest asked winning, as in controller-runtime's
// priority queue.
func (o *order[T]) wish(item T, p int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if w, ok := o.want[item]; !ok || p > w {
		o.want[item] = p
	}
}

func (o *order[T]) took(item T) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.taken[item]
	delete(o.taken, item)
	return p
}

// Push implements workqueue.Queue.
func (o *order[T]) Push(item T) {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.want[item]
	delete(o.want, item)
	o.put(item, p)
}

// Touch implements workqueue.Queue: an item added again while it waits moves up to a higher
// priority asked for, to the end of that priority's lane.
func (o *order[T]) Touch(item T) {
	o.mu.Lock()
	defer o.mu.Unlock()
	p, asked := o.want[item]
	delete(o.want, item)
	if cur, held := o.prio[item]; held && asked && p > cur {
		o.levelOf(cur).Remove(item)
		o.dropEmpty()
		o.put(item, p)
	}
}

// Pop implements workqueue.Queue; client-go calls it only when Len is above 0.
func (o *order[T]) Pop() T {
	o.mu.Lock()
	defer o.mu.Unlock()
	item, _ := o.levels[0].rr.Pop()
	o.taken[item] = o.prio[item]
	delete(o.prio, item)
	o.dropEmpty()
	return item
}

// Len implements workqueue.Queue.
func (o *order[T]) Len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.prio)
}

func (o *order[T]) put(item T, p int) {
	o.prio[item] = p
	o.levelOf(p).Push(o.tenant(item), item)
}

// levelOf returns priority p's round robin, made when missing: there are few priorities.
func (o *order[T]) levelOf(p int) *RoundRobin[T] {
	i, found := slices.BinarySearchFunc(o.levels, p, func(l level[T], p int) int { return p - l.priority })
	if !found {
		o.levels = slices.Insert(o.levels, i, level[T]{priority: p, rr: NewRoundRobin[T]()})
	}
	return o.levels[i].rr
}

func (o *order[T]) dropEmpty() {
	o.levels = slices.DeleteFunc(o.levels, func(l level[T]) bool { return l.rr.Len() == 0 })
}
