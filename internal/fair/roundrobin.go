// Package fair shares work between tenants (namespaces) in turn, so that one tenant with
// thousands of items waiting delays another's single item by one turn, not by the backlog.
package fair

import "container/list"

// RoundRobin holds items in one FIFO lane per tenant and hands them out one lane at a time,
// in turn. An item is held at most once. It is not safe for concurrent use.
type RoundRobin[T comparable] struct {
	ring  list.List // of *lane[T], in turn order
	lanes map[string]*list.Element
	items map[T]entry[T]
}

type lane[T comparable] struct {
	tenant string
	items  list.List // of T
	next   uint64    // sequence number of the next item pushed
}

type entry[T comparable] struct {
	lane *list.Element // in ring
	el   *list.Element // in the lane's items
	seq  uint64
}

// NewRoundRobin returns an empty RoundRobin.
func NewRoundRobin[T comparable]() *RoundRobin[T] {
	return &RoundRobin[T]{lanes: map[string]*list.Element{}, items: map[T]entry[T]{}}
}

// Push appends item to tenant's lane; a tenant new to the ring takes its turn after the
// others. It reports false, and changes nothing, when item is already held.
func (r *RoundRobin[T]) Push(tenant string, item T) bool {
	if _, ok := r.items[item]; ok {
		return false
	}
	le, ok := r.lanes[tenant]
	if !ok {
		le = r.ring.PushBack(&lane[T]{tenant: tenant})
		r.lanes[tenant] = le
	}
	l := le.Value.(*lane[T])
	r.items[item] = entry[T]{lane: le, el: l.items.PushBack(item), seq: l.next}
	l.next++
	return true
}

// Pop takes the oldest item of the tenant whose turn it is; that tenant's next turn comes
// after every other tenant's.
func (r *RoundRobin[T]) Pop() (T, bool) {
	front := r.ring.Front()
	if front == nil {
		var zero T
		return zero, false
	}
	item := front.Value.(*lane[T]).items.Front().Value.(T)
	r.Remove(item)
	if r.ring.Front() == front {
		r.ring.MoveToBack(front)
	}
	return item, true
}

// Remove drops item wherever it waits; a lane left empty leaves the ring.
func (r *RoundRobin[T]) Remove(item T) bool {
	e, ok := r.items[item]
	if !ok {
		return false
	}
	delete(r.items, item)
	l := e.lane.Value.(*lane[T])
	l.items.Remove(e.el)
	if l.items.Len() == 0 {
		r.ring.Remove(e.lane)
		delete(r.lanes, l.tenant)
	}
	return true
}

// Oldest returns the oldest item of tenant's lane, leaving it held and the turns as they are.
func (r *RoundRobin[T]) Oldest(tenant string) (T, bool) {
	le, ok := r.lanes[tenant]
	if !ok {
		var zero T
		return zero, false
	}
	return le.Value.(*lane[T]).items.Front().Value.(T), true
}

// HasTenant reports whether tenant has items held.
func (r *RoundRobin[T]) HasTenant(tenant string) bool {
	_, ok := r.lanes[tenant]
	return ok
}

// Has reports whether item is held.
func (r *RoundRobin[T]) Has(item T) bool {
	_, ok := r.items[item]
	return ok
}

// Len is the number of items held.
func (r *RoundRobin[T]) Len() int { return len(r.items) }

// Tenants is the number of tenants with items held.
func (r *RoundRobin[T]) Tenants() int { return r.ring.Len() }

// Ahead estimates how many items are handed out before item: the items ahead of it in its
// lane, one turn each, times the tenants taking turns, bounded by all items held. Items
// removed from the middle of a lane still count (cheap, and an estimate only).
func (r *RoundRobin[T]) Ahead(item T) int {
	e, ok := r.items[item]
	if !ok {
		return 0
	}
	head := r.items[e.lane.Value.(*lane[T]).items.Front().Value.(T)].seq
	return min(int(e.seq-head)*r.ring.Len(), len(r.items)-1)
}
