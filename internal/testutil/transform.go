package testutil

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
)

// SecondPass applies a cache transform to obj, then applies it again to what it returned
// while another goroutine reads that object whole (every field, labels, annotations and
// managed fields included, as JSON does), and returns the object. An informer hands the
// transform an object its cache already holds, and its readers share, when it learns of the
// object's deletion (a re-list during a shard hand-over): the second pass must write nothing
// to it. Under the race detector (make test runs these tests with -race) any write of the
// second pass fails the test; without it, the second pass must at least leave the object as
// the first pass left it.
func SecondPass[T runtime.Object](t testing.TB, transform func(any) (any, error), obj T) T {
	t.Helper()
	out, err := transform(obj)
	Must(t, err)
	first, ok := out.(T)
	if !ok {
		t.Fatalf("first pass returned %T, want %T", out, obj)
	}
	want := first.DeepCopyObject()
	read := make(chan error)
	go func() {
		_, err := json.Marshal(first)
		read <- err
	}()
	again, err := transform(first)
	Must(t, <-read)
	Must(t, err)
	if !equality.Semantic.DeepEqual(again, want) {
		t.Fatalf("the second pass changed the object:\n got %s\nwant %s", must(json.Marshal(again)), must(json.Marshal(want)))
	}
	return first
}

func must(b []byte, err error) []byte {
	if err != nil {
		return []byte(err.Error())
	}
	return b
}
