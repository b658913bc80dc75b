package controller

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
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

// liveRetry hands back the events of one source type whose lookup failed: one pending
// retry per source, with its latest object, however many of its events failed.
type liveRetry struct {
	events chan event.GenericEvent
	mu     sync.Mutex
	// pending are the sources waiting to be looked up again, by UID.
	pending map[types.UID]*retrying
	// ctx is the watch's, set when it starts (started is closed then): it ends with the
	// manager. The context a handler is called with ends with the event.
	ctx       context.Context
	started   chan struct{}
	startOnce sync.Once
}

// retrying is a source to look up again: its latest object, the lookups failed in a row (the
// backoff doubles with each), and whether a hand-back is scheduled.
type retrying struct {
	obj       client.Object
	failures  int
	scheduled bool
}

func newLiveRetry() *liveRetry {
	return &liveRetry{events: make(chan event.GenericEvent), pending: map[types.UID]*retrying{}, started: make(chan struct{})}
}

// source is the watch through which the events handed back are looked up again, by mapping.
func (l *liveRetry) source(mapping handler.MapFunc) crsource.Source {
	channel := crsource.Channel(l.events, handler.EnqueueRequestsFromMapFunc(mapping))
	return crsource.Func(func(ctx context.Context, q workqueueOfRequests) error {
		l.mu.Lock()
		l.ctx = ctx
		l.mu.Unlock()
		l.startOnce.Do(func() { close(l.started) })
		return channel.Start(ctx, q)
	})
}

// failed schedules o to be looked up again after the backoff its source's failures in a row
// call for; a source already scheduled keeps its time and takes o as its latest object. ctx
// is the failed lookup's, for its logger.
func (l *liveRetry) failed(ctx context.Context, o client.Object) {
	l.mu.Lock()
	p, ok := l.pending[o.GetUID()]
	if !ok {
		if len(l.pending) >= liveRetryPending {
			l.mu.Unlock()
			log.FromContext(ctx).Error(nil, "too many source changes wait for a lookup again; this one waits for its source's next change",
				"namespace", o.GetNamespace(), "source", o.GetName(), "pending", liveRetryPending)
			return
		}
		p = &retrying{}
		l.pending[o.GetUID()] = p
	}
	p.obj = o
	if p.scheduled {
		l.mu.Unlock()
		return
	}
	p.scheduled = true
	delay := min(liveRetryFirst<<min(p.failures, 6), liveRetryMax)
	p.failures++
	l.mu.Unlock()
	log.FromContext(ctx).Info("the workloads a source change concerns could not be listed; looking again",
		"namespace", o.GetNamespace(), "source", o.GetName(), "in", delay.String())
	go l.handBack(o.GetUID(), delay)
}

// handBack sends the latest object of source uid to the watch after delay.
func (l *liveRetry) handBack(uid types.UID, delay time.Duration) {
	t := time.NewTimer(delay)
	defer t.Stop()
	<-l.started // a lookup may fail before the watch that hands it back has started
	l.mu.Lock()
	watch := l.ctx
	l.mu.Unlock()
	select {
	case <-watch.Done():
		return
	case <-t.C:
	}
	l.mu.Lock()
	p, ok := l.pending[uid]
	var latest client.Object
	if ok {
		p.scheduled, latest = false, p.obj
	}
	l.mu.Unlock()
	if !ok {
		return // looked up meanwhile, by a later event of the source
	}
	select {
	case l.events <- event.GenericEvent{Object: latest}:
	case <-watch.Done():
	}
}

// succeeded forgets o's source: its latest change has been looked up.
func (l *liveRetry) succeeded(o client.Object) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.pending, o.GetUID())
}
