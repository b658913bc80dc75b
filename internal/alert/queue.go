package alert

import (
	"sync"

	"github.com/go-logr/logr"

	"github.com/reloader-operator/reloader/internal/fair"
)

// QueueSize bounds the alerts waiting to be sent, NamespaceShare those of one namespace. A
// namespace may fill the queue while no other waits (a fan-out to hundreds of workloads of one
// namespace alerts for each), but once it is full the namespace holding the most gives up its
// alerts: a flood drops its own alerts, never another's.
const (
	QueueSize      = 256
	NamespaceShare = QueueSize
)

// queue holds the alerts waiting, one lane per namespace, handed out in turn (fair.RoundRobin),
// so that one namespace's flood delays another's alert by one turn, not by the backlog. When
// a namespace holds its share, its new alert is dropped; when the queue is full, the namespace
// holding the most gives up its oldest (or the newcomer's alert is dropped, when it holds as
// many as any other).
type queue struct {
	mu     sync.Mutex
	order  *fair.RoundRobin[uint64]
	shares *fair.Shares[uint64]
	items  map[uint64]Reload
	seq    uint64
	// dropped counts the alerts dropped per namespace, for the log line.
	dropped map[string]uint64
	// ready has a token while alerts wait.
	ready chan struct{}
}

func newQueue(size, share int) *queue {
	return &queue{
		order:   fair.NewRoundRobin[uint64](),
		shares:  fair.NewShares[uint64](size, share),
		items:   map[uint64]Reload{},
		dropped: map[string]uint64{},
		ready:   make(chan struct{}, 1),
	}
}

// push queues r, or drops an alert to bound the queue; it returns the alert dropped, if any.
func (q *queue) push(r Reload) (Reload, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out Reload
	dropped := false
	if victim, crowded := q.shares.Crowded(r.Namespace); crowded {
		if victim == r.Namespace {
			return r, true
		}
		oldest, found := uint64(0), false
		for id := range q.shares.Keys(victim) {
			if !found || id < oldest {
				oldest, found = id, true
			}
		}
		if found {
			out, dropped = q.items[oldest], true
			q.remove(victim, oldest)
		}
	}
	q.seq++
	q.items[q.seq] = r
	q.order.Push(r.Namespace, q.seq)
	q.shares.Add(r.Namespace, q.seq)
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return out, dropped
}

// pop takes the alert of the namespace whose turn it is.
func (q *queue) pop() (Reload, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	id, ok := q.order.Pop()
	if !ok {
		return Reload{}, false
	}
	r := q.items[id]
	delete(q.items, id)
	q.shares.Remove(r.Namespace, id)
	if q.order.Len() > 0 {
		select {
		case q.ready <- struct{}{}:
		default:
		}
	}
	return r, true
}

func (q *queue) remove(ns string, id uint64) {
	q.order.Remove(id)
	q.shares.Remove(ns, id)
	delete(q.items, id)
}

// drop counts an alert of r's namespace dropped, and logs the first of the namespace and
// then each power of two, so that a flood costs a few log lines, not one per alert.
func (q *queue) drop(log logr.Logger, r Reload) {
	q.mu.Lock()
	q.dropped[r.Namespace]++
	n := q.dropped[r.Namespace]
	q.mu.Unlock()
	if n&(n-1) == 0 {
		log.Info("alert queue: namespace's share full; alert dropped", "namespace", r.Namespace,
			"workload", r.Kind+" "+r.Namespace+"/"+r.Name, "droppedInNamespace", n)
	}
}
