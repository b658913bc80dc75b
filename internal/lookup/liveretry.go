package lookup

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	crsource "sigs.k8s.io/controller-runtime/pkg/source"
)

// In degraded mode a source event finds its workloads with a LIST sent to the API server, and
// a LIST can fail: a timeout, a 429, an API server restarting. The event is then handed back
// after a backoff and its workloads looked up again, until a lookup succeeds: otherwise the
// change would reach no workload until its source changed once more.
const (
	liveRetryFirst = time.Second
	liveRetryMax   = time.Minute
	// liveRetryPending bounds the sources waiting for a lookup again: past it, a failed
	// lookup is logged and dropped (an API server refusing every LIST for that long has
	// bigger troubles, and each source's next change looks again).
	liveRetryPending = 10000
)

// LiveRetry hands back the events of one source type whose lookup failed: one pending
// retry per source, with its latest object, however many of its events failed. The delays
// and the failures in a row are client-go's rate-limited work queue's, keyed by the
// source's UID.
type LiveRetry struct {
	events chan event.GenericEvent
	queue  workqueue.TypedRateLimitingInterface[types.UID]
	mu     sync.Mutex
	// waiting holds the latest object of each source whose hand-back is scheduled.
	waiting map[types.UID]client.Object
}

// NewLiveRetry returns an empty LiveRetry; its Source starts it.
func NewLiveRetry() *LiveRetry {
	return &LiveRetry{
		events: make(chan event.GenericEvent),
		queue: workqueue.NewTypedRateLimitingQueue(
			workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](liveRetryFirst, liveRetryMax)),
		waiting: map[types.UID]client.Object{},
	}
}

// Source is the watch through which the events handed back are looked up again, through h
// (a SourceMapper's). A lookup may fail before it starts: its hand-back waits in the queue.
func (l *LiveRetry) Source(h handler.EventHandler) crsource.Source {
	channel := crsource.Channel(l.events, h)
	return crsource.Func(func(ctx context.Context, q WorkqueueOfRequests) error {
		go func() {
			<-ctx.Done()
			l.queue.ShutDown()
		}()
		go l.handBack(ctx)
		return channel.Start(ctx, q)
	})
}

// Failed schedules o to be looked up again after the backoff its source's failures in a row
// call for; a source already scheduled keeps its time and takes o as its latest object. ctx
// is the failed lookup's, for its logger.
func (l *LiveRetry) Failed(ctx context.Context, o client.Object) {
	uid := o.GetUID()
	l.mu.Lock()
	_, scheduled := l.waiting[uid]
	if !scheduled && len(l.waiting) >= liveRetryPending {
		l.mu.Unlock()
		log.FromContext(ctx).Error(nil, "too many source changes wait for a lookup again; this one waits for its source's next change",
			"namespace", o.GetNamespace(), "source", o.GetName(), "pending", liveRetryPending)
		return
	}
	l.waiting[uid] = o
	l.mu.Unlock()
	if scheduled {
		return
	}
	log.FromContext(ctx).Info("the workloads a source change concerns could not be listed; looking again",
		"namespace", o.GetNamespace(), "source", o.GetName(), "failures", l.queue.NumRequeues(uid)+1)
	l.queue.AddRateLimited(uid)
}

// handBack sends each source whose backoff has passed, as its latest object, to the watch.
func (l *LiveRetry) handBack(ctx context.Context) {
	for {
		uid, shutdown := l.queue.Get()
		if shutdown {
			return
		}
		l.mu.Lock()
		latest, ok := l.waiting[uid]
		delete(l.waiting, uid)
		l.mu.Unlock()
		l.queue.Done(uid)
		if !ok {
			continue // looked up meanwhile, by a later event of the source
		}
		select {
		case l.events <- event.GenericEvent{Object: latest}:
		case <-ctx.Done():
			return
		}
	}
}

// Succeeded forgets o's source: its latest change has been looked up.
func (l *LiveRetry) Succeeded(o client.Object) {
	l.mu.Lock()
	delete(l.waiting, o.GetUID())
	l.mu.Unlock()
	l.queue.Forget(o.GetUID())
}
