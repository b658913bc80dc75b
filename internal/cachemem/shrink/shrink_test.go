package shrink_test

import (
	"reflect"
	"testing"

	"github.com/reloader-operator/reloader/internal/cachemem/shrink"
)

func TestDeleteRenewsTheMapOnceEmpty(t *testing.T) {
	m := map[int]string{1: "a", 2: "b"}
	grown := reflect.ValueOf(m).UnsafePointer()
	shrink.Delete(&m, 1)
	if reflect.ValueOf(m).UnsafePointer() != grown || len(m) != 1 || m[2] != "b" {
		t.Fatalf("a map with entries left was replaced or lost one: %v", m)
	}
	shrink.Delete(&m, 2)
	if m == nil || len(m) != 0 || reflect.ValueOf(m).UnsafePointer() == grown {
		t.Fatalf("an emptied map was kept, or left nil: %v", m)
	}
	var none map[int]string
	shrink.Delete(&none, 1)
	if none == nil {
		t.Error("deleting from a nil map left it nil: a later insert would panic")
	}
}
