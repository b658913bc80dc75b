package lookup

import (
	"context"
	"maps"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	crsource "sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/reloader-operator/reloader/internal/fair"
	"github.com/reloader-operator/reloader/internal/sourcecache"
)

// The informer of a source type calls each handler of it on one goroutine, for every
// namespace: a lookup of the workloads a source event concerns, made there, would hold back
// every other namespace's events of that type behind it. The handler only notes the source
// in a queue that takes turns between namespaces (SourceMapper); workers make the lookups.
const (
	// mapWorkers make the lookups of one workload kind and source type.
	mapWorkers = 2
	// mapVariants bounds the versions of one source held for a lookup: one per distinct set
	// of annotations and labels (they decide what it concerns); past it, the latest
	// replaces the last.
	mapVariants = 4
)

// SourceMapper maps the events of one source type to the workloads of one kind, off the
// informer's goroutine: the handler (Events) queues the source by namespace and name,
// keeping the objects to map; mapWorkers workers take the sources in turn between
// namespaces, map each object held and queue the workloads found. A source queued again
// before its lookup is looked up once, with its latest objects.
type SourceMapper struct {
	mapping MapFunc
	queue   workqueue.TypedRateLimitingInterface[mapKey]
	mu      sync.Mutex
	pending map[mapKey]*mapPending
}

type mapKey struct{ Namespace, Name string }

// mapPending is what a queued source's lookup maps: its objects (old and new of each update
// whose annotations or labels differ), and whether every event was of low priority (a
// resync: what a controller-runtime handler would have queued at low priority).
type mapPending struct {
	objs []client.Object
	low  bool
}

// MapFunc maps a source object to the workloads it concerns, each with how it is queued.
type MapFunc func(context.Context, client.Object) []Queued

// Queued is a workload request a lookup found, and how it goes into the controller's queue.
type Queued struct {
	reconcile.Request
	// After, when positive, queues it that much later: a workload whose reconcile would only
	// wait for its coalescing window comes when the window closes, not twice.
	After time.Duration
	// Priority, when set, is its priority in a priority queue (a plain add otherwise).
	Priority *int
}

// Plain makes Queued of requests added at once.
func Plain(reqs []reconcile.Request) []Queued {
	out := make([]Queued, len(reqs))
	for i, r := range reqs {
		out[i] = Queued{Request: r}
	}
	return out
}

// NewSourceMapper returns a mapper through mapping; name names its queue (workqueue metrics).
func NewSourceMapper(name string, mapping MapFunc) *SourceMapper {
	return &SourceMapper{mapping: mapping, pending: map[mapKey]*mapPending{},
		queue: fair.NewQueue(name, workqueue.DefaultTypedControllerRateLimiter[mapKey](),
			func(k mapKey) string { return k.Namespace })}
}

// Source starts the workers, which queue the workloads they find in the controller's queue.
func (m *SourceMapper) Source() crsource.Source {
	return crsource.Func(func(ctx context.Context, q WorkqueueOfRequests) error {
		go func() {
			<-ctx.Done()
			m.queue.ShutDown()
		}()
		for range mapWorkers {
			go m.work(ctx, q)
		}
		return nil
	})
}

// Events is the handler of the source type's watch: it only queues.
func (m *SourceMapper) Events() handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, _ WorkqueueOfRequests) {
			m.add(e.IsInInitialList, e.Object)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, _ WorkqueueOfRequests) {
			m.add(e.ObjectOld.GetResourceVersion() == e.ObjectNew.GetResourceVersion(), e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, _ WorkqueueOfRequests) {
			m.add(false, e.Object)
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, _ WorkqueueOfRequests) {
			m.add(false, e.Object)
		},
	}
}

func (m *SourceMapper) add(low bool, objs ...client.Object) {
	if len(objs) == 0 || objs[0] == nil {
		return
	}
	k := mapKey{Namespace: objs[0].GetNamespace(), Name: objs[0].GetName()}
	m.mu.Lock()
	p, ok := m.pending[k]
	if !ok {
		p = &mapPending{low: true}
		m.pending[k] = p
	}
	p.low = p.low && low
	for _, o := range objs {
		p.objs = keepVariant(p.objs, o)
	}
	m.mu.Unlock()
	m.queue.Add(k)
}

// keepVariant adds o to objs: in place of the version with the same annotations and labels,
// else appended, else (mapVariants held) in place of the last.
func keepVariant(objs []client.Object, o client.Object) []client.Object {
	for i, held := range objs {
		if maps.Equal(held.GetAnnotations(), o.GetAnnotations()) && maps.Equal(held.GetLabels(), o.GetLabels()) {
			objs[i] = o
			return objs
		}
	}
	if len(objs) < mapVariants {
		return append(objs, o)
	}
	objs[len(objs)-1] = o
	return objs
}

func (m *SourceMapper) work(ctx context.Context, q WorkqueueOfRequests) {
	for {
		k, shutdown := m.queue.Get()
		if shutdown {
			return
		}
		m.mu.Lock()
		p := m.pending[k]
		delete(m.pending, k)
		m.mu.Unlock()
		if p != nil {
			m.lookup(ctx, q, p)
		}
		m.queue.Done(k)
	}
}

// lookup maps the objects of one source and queues each workload found once, as
// controller-runtime's handler would have, or later when the mapping says so. A resync's
// (low priority) requests go in at once, at low priority.
func (m *SourceMapper) lookup(ctx context.Context, q WorkqueueOfRequests, p *mapPending) {
	queued, lowPriority := map[reconcile.Request]bool{}, handler.LowPriority
	pq, prioritized := q.(priorityqueue.PriorityQueue[reconcile.Request])
	for _, o := range p.objs {
		for _, in := range m.mapping(ctx, o) {
			req := in.Request
			if queued[req] {
				continue
			}
			queued[req] = true
			switch {
			case p.low && prioritized:
				pq.AddWithOpts(priorityqueue.AddOpts{Priority: &lowPriority}, req)
			case p.low || in.After <= 0 && in.Priority == nil:
				q.Add(req)
			case prioritized:
				pq.AddWithOpts(priorityqueue.AddOpts{After: in.After, Priority: in.Priority}, req)
			case in.After > 0:
				q.AddAfter(req, in.After)
			default:
				q.Add(req)
			}
		}
	}
}

// MapQueueName names a source mapper's queue (its workqueue metrics).
func MapQueueName(kind string, st sourcecache.SourceType) string {
	return strings.ToLower(kind) + "-" + strings.ToLower(string(st.Kind)) + "-events"
}
