package lazywatch

import (
	"errors"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/controller"
	crsource "sigs.k8s.io/controller-runtime/pkg/source"
)

// fakeController records the sources it is asked to watch; failing makes the next Watch fail.
type fakeController struct {
	controller.Controller
	watched []crsource.Source
	failing bool
}

func (f *fakeController) Watch(src crsource.Source) error {
	if f.failing {
		f.failing = false
		return errors.New("no informer")
	}
	f.watched = append(f.watched, src)
	return nil
}

type namedSource struct {
	crsource.Source
	name string
}

func TestStartWatchesOnceAndRetriesAFailure(t *testing.T) {
	var w Watches
	a, b := namedSource{name: "a"}, namedSource{name: "b"}
	w.Add(a)
	w.Add(b)
	if err := w.Start(); err != nil || w.Started() {
		t.Fatalf("Start before Bind: %v, started %v; want nothing done", err, w.Started())
	}
	f := &fakeController{failing: true}
	w.Bind(f)
	if err := w.Start(); err == nil || len(f.watched) != 0 || w.Started() {
		t.Fatalf("first Start: err %v, watched %d, started %v; want the failure, none, false", err, len(f.watched), w.Started())
	}
	if err := w.Start(); err != nil || len(f.watched) != 2 || !w.Started() {
		t.Fatalf("second Start: err %v, watched %d, started %v; want nil, 2, true", err, len(f.watched), w.Started())
	}
	if f.watched[0] != crsource.Source(a) || f.watched[1] != crsource.Source(b) {
		t.Errorf("watched %v, want a then b", f.watched)
	}
	if err := w.Start(); err != nil || len(f.watched) != 2 {
		t.Errorf("third Start: err %v, watched %d; want nil and no source started twice", err, len(f.watched))
	}
}
