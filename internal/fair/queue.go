package fair

import (
	"slices"
	"sync"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
)

// NewQueue returns a controller's work queue that takes turns between tenants: client-go's
// rate-limiting queue (dedup of queued items, no item processed twice at once, backoff,
// AddAfter, shutdown, workqueue_* metrics under name) over an order that serves each tenant
// in turn, each tenant's highest priority first and its items of one priority first in
// first out. Negative priorities (controller-runtime's LowPriority: the initial list) wait
// until no tenant has anything else: changes go ahead of the start-up list, as in
// controller-runtime's default priority queue, but one tenant's high-priority items do not
// hold back another tenant's changes.
func NewQueue[T comparable](name string, rl workqueue.TypedRateLimiter[T], tenant func(T) string) priorityqueue.PriorityQueue[T] {
	o := &order[T]{tenant: tenant, prio: map[T]int{}, want: map[T]int{}, taken: map[T]int{}}
	for i := range o.bands {
		o.bands[i].turns = NewRoundRobin[string]()
	}
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
//
// Priorities at or above 0 (changes, reloads whose window closed) share one turn order
// between tenants, each tenant's turn serving its highest priority first: a tenant with a
// thousand reloads due at a high priority delays another's change by one turn, as one with
// a thousand changes does. Priorities below 0 (the informers' first list, first records
// waiting for their slot) are background: served only when no tenant has anything at 0 or
// above, in turn between tenants likewise.
type order[T comparable] struct {
	tenant func(T) string
	mu     sync.Mutex
	bands  [2]band[T] // due (priority >= 0), then background
	prio   map[T]int  // of each item held
	want   map[T]int  // priorities asked for items not in the order yet
	taken  map[T]int  // priorities of items popped, until their Get returns
}

// band holds the items of one band of priorities.
type band[T comparable] struct {
	turns  *RoundRobin[string] // the tenants with items in the band, each its own lane
	levels []level[T]          // by priority, highest first
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
		o.remove(item, cur)
		o.put(item, p)
	}
}

// Pop implements workqueue.Queue; client-go calls it only when Len is above 0. The tenant
// whose turn it is gives its oldest item of its highest priority, and takes its next turn
// after the others.
func (o *order[T]) Pop() T {
	o.mu.Lock()
	defer o.mu.Unlock()
	b := &o.bands[0]
	if b.turns.Len() == 0 {
		b = &o.bands[1]
	}
	tenant, _ := b.turns.Pop()
	var item T
	for _, l := range b.levels {
		if it, ok := l.rr.Oldest(tenant); ok {
			item = it
			break
		}
	}
	p := o.prio[item]
	o.remove(item, p)
	if b.holds(tenant) {
		b.turns.Push(tenant, tenant)
	}
	o.taken[item] = p
	return item
}

// Len implements workqueue.Queue.
func (o *order[T]) Len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.prio)
}

func (o *order[T]) bandOf(p int) *band[T] {
	if p >= 0 {
		return &o.bands[0]
	}
	return &o.bands[1]
}

// put holds item at priority p; its tenant, new to the band, takes its turn after the others.
func (o *order[T]) put(item T, p int) {
	o.prio[item] = p
	t, b := o.tenant(item), o.bandOf(p)
	b.levelOf(p).Push(t, item)
	b.turns.Push(t, t) // a tenant already taking turns keeps its place
}

// remove drops item, held at priority p; a tenant left without items in the band leaves its
// turns.
func (o *order[T]) remove(item T, p int) {
	delete(o.prio, item)
	t, b := o.tenant(item), o.bandOf(p)
	b.levelOf(p).Remove(item)
	b.levels = slices.DeleteFunc(b.levels, func(l level[T]) bool { return l.rr.Len() == 0 })
	if !b.holds(t) {
		b.turns.Remove(t)
	}
}

// holds reports whether tenant has items in the band.
func (b *band[T]) holds(tenant string) bool {
	for _, l := range b.levels {
		if l.rr.HasTenant(tenant) {
			return true
		}
	}
	return false
}

// levelOf returns priority p's round robin, made when missing: there are few priorities.
func (b *band[T]) levelOf(p int) *RoundRobin[T] {
	i, found := slices.BinarySearchFunc(b.levels, p, func(l level[T], p int) int { return p - l.priority })
	if !found {
		b.levels = slices.Insert(b.levels, i, level[T]{priority: p, rr: NewRoundRobin[T]()})
	}
	return b.levels[i].rr
}
