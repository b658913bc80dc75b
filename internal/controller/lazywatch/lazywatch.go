// Package lazywatch holds the watches a controller needs only once it has work: the
// ReloaderConfig status and generic-target controllers follow sources and workloads for the
// configs that name them, and with no ReloaderConfig in the cluster every ConfigMap, Secret
// and workload event would reach them for nothing (a listener each on the busiest informers:
// goroutines, a buffer, a wake-up per event). Their controllers start watching configs only;
// the first reconcile of a config starts the rest, and the informers replay what they hold to
// the new handlers, so no state is missed.
package lazywatch

import (
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/controller"
	crsource "sigs.k8s.io/controller-runtime/pkg/source"
)

// Watches are sources to start on a controller when asked, once.
type Watches struct {
	mu      sync.Mutex
	ctl     controller.Controller
	pending []crsource.Source
}

// Add keeps src for Start.
func (w *Watches) Add(src crsource.Source) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = append(w.pending, src)
}

// Bind names the controller the sources start on.
func (w *Watches) Bind(c controller.Controller) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ctl = c
}

// Start starts the sources not started yet on the bound controller; a source whose start
// fails (Watch returns an error only for a source that cannot start at all) is tried again by
// the next call. It does not wait for them to sync: the informers behind them are made and
// synced with the manager's caches (internal/app, watch.go), so a handler added now is
// replayed what they hold at once. Without a bound controller it does nothing.
func (w *Watches) Start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ctl == nil {
		return nil
	}
	for len(w.pending) > 0 {
		if err := w.ctl.Watch(w.pending[0]); err != nil {
			return err
		}
		w.pending = w.pending[1:]
	}
	return nil
}

// Started tells whether every source was started.
func (w *Watches) Started() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ctl != nil && len(w.pending) == 0
}
