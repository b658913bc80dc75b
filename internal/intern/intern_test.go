package intern_test

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reloader-operator/reloader/internal/intern"
)

// decoded returns metadata whose every string is a copy of its own, as a decoder makes them.
func decoded() *metav1.ObjectMeta {
	c := strings.Clone
	return &metav1.ObjectMeta{
		Namespace:   c("team-a"),
		Labels:      map[string]string{c("app.kubernetes.io/managed-by"): c("Helm")},
		Annotations: map[string]string{c("meta.helm.sh/release-name"): c("web-1")},
	}
}

func keyOf(m map[string]string) string {
	for k := range m {
		return k
	}
	return ""
}

func same(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// TestMetaSharesRepeatedStrings: two objects decoded apart share their namespace, label keys
// and values, and annotation keys once interned, and keep every value they had.
func TestMetaSharesRepeatedStrings(t *testing.T) {
	a, b := decoded(), decoded()
	if same(a.Namespace, b.Namespace) || same(keyOf(a.Labels), keyOf(b.Labels)) {
		t.Fatal("the decoded copies already share their strings: the test proves nothing")
	}
	intern.Meta(a)
	runtime.GC() // the shared copy outlives a collection
	intern.Meta(b)
	for what, pair := range map[string][2]string{
		"namespace":      {a.Namespace, b.Namespace},
		"label key":      {keyOf(a.Labels), keyOf(b.Labels)},
		"label value":    {a.Labels["app.kubernetes.io/managed-by"], b.Labels["app.kubernetes.io/managed-by"]},
		"annotation key": {keyOf(a.Annotations), keyOf(b.Annotations)},
	} {
		if !same(pair[0], pair[1]) {
			t.Errorf("%s %q is held twice", what, pair[0])
		}
	}
	if same(a.Annotations["meta.helm.sh/release-name"], b.Annotations["meta.helm.sh/release-name"]) {
		t.Error("annotation values are interned: unique values would each cost an entry")
	}
	want := decoded()
	if a.Namespace != want.Namespace || a.Labels["app.kubernetes.io/managed-by"] != "Helm" ||
		a.Annotations["meta.helm.sh/release-name"] != "web-1" || len(a.Labels) != 1 || len(a.Annotations) != 1 {
		t.Errorf("interning changed the metadata: %+v", a)
	}
}

// TestTableIsBounded: past MaxEntries distinct strings the table starts over, and a string
// seen since is shared again.
func TestTableIsBounded(t *testing.T) {
	first := intern.String(strings.Clone("bounded-first"))
	for i := range intern.MaxEntries {
		intern.String(fmt.Sprintf("filler-%d", i))
	}
	again := intern.String(strings.Clone("bounded-first"))
	if same(first, again) {
		t.Error("the table kept a string past MaxEntries others: it is not bounded")
	}
	if !same(again, intern.String(strings.Clone("bounded-first"))) {
		t.Error("after starting over, a repeated string is not shared")
	}
}

func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// TestEqualLabelSetsShareOneMap: objects with equal labels hold one map, objects with other
// labels another, and an object seen again keeps the map it has.
func TestEqualLabelSetsShareOneMap(t *testing.T) {
	a, b, other := decoded(), decoded(), decoded()
	other.Labels["tier"] = "db"
	intern.Meta(a)
	runtime.GC()
	intern.Meta(b)
	intern.Meta(other)
	if !sameMap(a.Labels, b.Labels) {
		t.Error("equal label sets are held twice")
	}
	if sameMap(a.Labels, other.Labels) || len(other.Labels) != 2 || other.Labels["tier"] != "db" {
		t.Errorf("another label set shares the map or lost a label: %v", other.Labels)
	}
	shared := a.Labels
	intern.Meta(a)
	if !sameMap(a.Labels, shared) {
		t.Error("an object interned twice changed its map")
	}
}

// TestSharedLabelsAreNeverWritten: informers of several kinds transform at once, and objects
// of each may hold the same shared map: Meta must only read it. (A write would make the
// runtime fail with "concurrent map writes"; go test -race reports it at once.)
func TestSharedLabelsAreNeverWritten(t *testing.T) {
	first := decoded()
	intern.Meta(first)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 2000 {
				o := &metav1.ObjectMeta{Namespace: "team-a", Labels: first.Labels}
				intern.Meta(o)
				if !sameMap(o.Labels, first.Labels) {
					t.Error("an object holding the shared map got another")
					return
				}
			}
		})
	}
	wg.Wait()
}
