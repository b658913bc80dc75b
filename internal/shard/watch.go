package shard

import (
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// filteredWatch passes on the events of owned namespaces, and ends as expired when the owned
// shards change, so that the informer lists again under the new selector.
type filteredWatch struct {
	upstream watch.Interface
	out      chan watch.Event
	stop     chan struct{}
	once     sync.Once
}

// newFilteredWatch calls listed after the bookmark that ends a watch list's initial events
// has been passed on.
func newFilteredWatch(upstream watch.Interface, keep func(runtime.Object) bool, moved <-chan struct{}, listed func(rv string)) watch.Interface {
	w := &filteredWatch{upstream: upstream, out: make(chan watch.Event), stop: make(chan struct{})}
	go w.run(keep, moved, listed)
	return w
}

func (w *filteredWatch) run(keep func(runtime.Object) bool, moved <-chan struct{}, listed func(rv string)) {
	defer close(w.out)
	defer w.upstream.Stop()
	in := w.upstream.ResultChan()
	for {
		select {
		case ev, ok := <-in:
			if !ok {
				return
			}
			switch ev.Type {
			case watch.Added, watch.Modified, watch.Deleted:
				if !keep(ev.Object) {
					continue
				}
			}
			if !w.send(ev) {
				return
			}
			if ev.Type == watch.Bookmark && initialEventsEnd(ev.Object) {
				listed(resourceVersion(ev.Object))
			}
		case <-moved:
			w.send(watch.Event{Type: watch.Error, Object: &metav1.Status{
				Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired,
				Message: "the shards this replica owns changed; list again"}})
			return
		case <-w.stop:
			return
		}
	}
}

func resourceVersion(o runtime.Object) string {
	m, err := meta.Accessor(o)
	if err != nil {
		return ""
	}
	return m.GetResourceVersion()
}

func initialEventsEnd(o runtime.Object) bool {
	m, err := meta.Accessor(o)
	return err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true"
}

func (w *filteredWatch) send(ev watch.Event) bool {
	select {
	case w.out <- ev:
		return true
	case <-w.stop:
		return false
	}
}

func (w *filteredWatch) Stop()                          { w.once.Do(func() { close(w.stop) }) }
func (w *filteredWatch) ResultChan() <-chan watch.Event { return w.out }
