package app

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/reloader-operator/reloader/internal/coreevents"
)

// eventRecorder returns the recorder of reloader's Events: core/v1 Events (the "" group), as
// upstream writes them, reported by reloader-configmaps or reloader-secrets after the source
// that caused them (see internal/coreevents). It records until the manager has stopped its
// reconcilers, then writes what they recorded last (eventsFlush): a reload finished during
// the shutdown (writer.Carried) is reported too.
func eventRecorder(ctx context.Context, mgr manager.Manager) (recorder.EventRecorder, error) {
	cs, err := kubernetes.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, err
	}
	b, writes := coreevents.NewTrackedBroadcaster(cs.CoreV1())
	// Not ctx: the writes of Events recorded while stopping would be cancelled with it.
	rec, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if err := b.StartRecordingToSinkWithContext(rec); err != nil {
		cancel()
		return nil, err
	}
	flushed := make(chan struct{})
	var once sync.Once
	shutdown := func() {
		once.Do(func() {
			// Before Shutdown: the recorder hands each Event to the broadcaster from a
			// goroutine of its own, and a broadcaster shut down drops what comes after.
			settle, stop := context.WithTimeout(rec, eventsFlushTimeout)
			writes.Settle(settle, eventsQuiet)
			stop()
			b.Shutdown()
			cancel()
		})
	}
	if err := mgr.Add(&eventsFlush{cache: mgr.GetCache(), flush: func() { shutdown(); close(flushed) }}); err != nil {
		cancel()
		return nil, err
	}
	go func() {
		// A manager that never ran its runnables (not started, or failed first) leaves the
		// broadcaster to this.
		<-ctx.Done()
		select {
		case <-flushed:
		case <-time.After(eventsUnstartedGrace):
			shutdown()
		}
	}()
	return writes.Stamping(coreevents.NewRecorder(b, mgr.GetScheme())), nil
}

// Writing the last Events takes at most eventsFlushTimeout, well within the 15 s the process
// gives the manager to stop (cmd/reloader); they are written once no write has begun for
// eventsQuiet.
const (
	eventsFlushTimeout   = 5 * time.Second
	eventsQuiet          = 250 * time.Millisecond
	eventsUnstartedGrace = 30 * time.Second
)

// eventsFlush writes the last Events when the manager stops. It is a runnable with a cache:
// controller-runtime stops those after the reconcilers (which record Events) and before the
// webhooks and HTTP servers, so it runs its flush once the last reconcile has returned.
type eventsFlush struct {
	cache cache.Cache
	flush func()
}

// GetCache places it among the runnables stopped after the reconcilers.
func (f *eventsFlush) GetCache() cache.Cache { return f.cache }

// Start waits for the stop, then flushes.
func (f *eventsFlush) Start(ctx context.Context) error {
	<-ctx.Done()
	f.flush()
	return nil
}
