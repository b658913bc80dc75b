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
)

// liveRetry hands back the events of one source type whose lookup failed.
type liveRetry struct {
	events chan event.GenericEvent
	mu     sync.Mutex
	// ctx is the watch's, set when it starts (started is closed then): it ends with the
	// manager. The context a handler is called with ends with the event.
	ctx       context.Context
	started   chan struct{}
	startOnce sync.Once
	// failures counts, per source object, the lookups failed in a row: the backoff doubles
	// with each. An entry goes with the next lookup that succeeds.
	failures map[types.UID]int
}

func newLiveRetry() *liveRetry {
	return &liveRetry{events: make(chan event.GenericEvent), failures: map[types.UID]int{}, started: make(chan struct{})}
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

// failed hands o back after the backoff its failures in a row call for; ctx is the failed
// lookup's, for its logger.
func (l *liveRetry) failed(ctx context.Context, o client.Object) {
	l.mu.Lock()
	n := l.failures[o.GetUID()]
	l.failures[o.GetUID()] = n + 1
	l.mu.Unlock()
	delay := min(liveRetryFirst<<min(n, 6), liveRetryMax)
	log.FromContext(ctx).Info("the workloads a source change concerns could not be listed; looking again",
		"namespace", o.GetNamespace(), "source", o.GetName(), "in", delay.String())
	go func() {
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
		select {
		case l.events <- event.GenericEvent{Object: o}:
		case <-watch.Done():
		}
	}()
}

// succeeded forgets o's failures.
func (l *liveRetry) succeeded(o client.Object) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.failures, o.GetUID())
}
