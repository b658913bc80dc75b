package intern_test

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reloader-operator/reloader/internal/cachemem/intern"
	"github.com/reloader-operator/reloader/internal/testutil"
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
	tables := intern.New()
	a, b := decoded(), decoded()
	if same(a.Namespace, b.Namespace) || same(keyOf(a.Labels), keyOf(b.Labels)) {
		t.Fatal("the decoded copies already share their strings: the test proves nothing")
	}
	tables.Meta(a)
	runtime.GC() // the shared copy outlives a collection
	tables.Meta(b)
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

// TestTablesAreBounded: strings and label sets in use stay shared however many others pass
// through; one not seen for two generations' worth of others gets a copy of its own again.
func TestTablesAreBounded(t *testing.T) {
	tables := intern.New()
	hot := tables.String(strings.Clone("bounded-hot"))
	cold := tables.String(strings.Clone("bounded-cold"))
	hotSet := &metav1.ObjectMeta{Labels: map[string]string{"set": "hot"}}
	coldSet := &metav1.ObjectMeta{Labels: map[string]string{"set": "cold"}}
	tables.Meta(hotSet)
	tables.Meta(coldSet)
	for i := range 2 * intern.MaxStrings {
		tables.String(fmt.Sprintf("filler-%d", i))
		if i < 2*intern.MaxLabelSets {
			tables.Meta(&metav1.ObjectMeta{Labels: map[string]string{"filler": fmt.Sprint(i)}})
		}
		if i%1000 == 0 { // in use
			if !same(hot, tables.String(strings.Clone("bounded-hot"))) {
				t.Fatalf("a string in use lost its shared copy after %d others", i)
			}
			o := &metav1.ObjectMeta{Labels: map[string]string{"set": "hot"}}
			if tables.Meta(o); !sameMap(o.Labels, hotSet.Labels) {
				t.Fatalf("a label set in use lost its shared map after %d others", i)
			}
		}
	}
	if same(cold, tables.String(strings.Clone("bounded-cold"))) {
		t.Error("a string unused for two generations is still held: the table is not bounded")
	}
	o := &metav1.ObjectMeta{Labels: map[string]string{"set": "cold"}}
	if tables.Meta(o); sameMap(o.Labels, coldSet.Labels) {
		t.Error("a label set unused for two generations is still held: the table is not bounded")
	}
}

func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// TestEqualLabelSetsShareOneMap: objects with equal labels hold one map, objects with other
// labels another, and an object seen again keeps the map it has.
func TestEqualLabelSetsShareOneMap(t *testing.T) {
	tables := intern.New()
	a, b, other := decoded(), decoded(), decoded()
	other.Labels["tier"] = "db"
	tables.Meta(a)
	runtime.GC()
	tables.Meta(b)
	tables.Meta(other)
	if !sameMap(a.Labels, b.Labels) {
		t.Error("equal label sets are held twice")
	}
	if sameMap(a.Labels, other.Labels) || len(other.Labels) != 2 || other.Labels["tier"] != "db" {
		t.Errorf("another label set shares the map or lost a label: %v", other.Labels)
	}
	shared := a.Labels
	tables.Meta(a)
	if !sameMap(a.Labels, shared) {
		t.Error("an object interned twice changed its map")
	}
}

// TestSharedLabelsAreNeverWritten: informers of several kinds transform at once, and objects
// of each may hold the same shared map: Meta must only read it. (A write would make the
// runtime fail with "concurrent map writes"; go test -race reports it at once.)
func TestSharedLabelsAreNeverWritten(t *testing.T) {
	tables := intern.New()
	first := decoded()
	tables.Meta(first)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 2000 {
				o := &metav1.ObjectMeta{Namespace: "team-a", Labels: first.Labels}
				tables.Meta(o)
				if !sameMap(o.Labels, first.Labels) {
					t.Error("an object holding the shared map got another")
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestKnownSetCostsNoAllocation: an object whose labels are a known set, in a known
// namespace, is interned without allocating (informers transform every object they receive).
func TestKnownSetCostsNoAllocation(t *testing.T) {
	tables := intern.New()
	tables.Meta(decoded())
	o := decoded()
	if n := testing.AllocsPerRun(100, func() { tables.Meta(o) }); n != 0 {
		t.Errorf("%v allocations per object with a known label set", n)
	}
}

// TestTablesAreOwned: two managers' tables share nothing, and nil tables intern nothing.
func TestTablesAreOwned(t *testing.T) {
	a, b := decoded(), decoded()
	intern.New().Meta(a)
	intern.New().Meta(b)
	if same(a.Namespace, b.Namespace) || sameMap(a.Labels, b.Labels) {
		t.Error("objects interned by two tables share a copy")
	}
	var none *intern.Tables
	c, d := decoded(), decoded()
	none.Meta(c)
	none.Meta(d)
	if same(c.Namespace, d.Namespace) || sameMap(c.Labels, d.Labels) || none.String("x") != "x" {
		t.Error("nil tables interned")
	}
	if want := decoded(); c.Namespace != want.Namespace || c.Labels["app.kubernetes.io/managed-by"] != "Helm" {
		t.Errorf("nil tables changed the metadata: %+v", c)
	}
}

// TestMetaAgainWritesNothing: Meta over an object it interned, while the tables still hold its
// strings, writes nothing to it (its namespace, label map and annotation keys are the shared
// ones already), as handlers may be reading it meanwhile. make test runs this under -race.
func TestMetaAgainWritesNothing(t *testing.T) {
	tables := intern.New()
	meta := func(o any) (any, error) {
		tables.Meta(o.(*corev1.ConfigMap))
		return o, nil
	}
	got := testutil.SecondPass(t, meta, &corev1.ConfigMap{ObjectMeta: *decoded()})
	if !same(got.Namespace, tables.String("team-a")) {
		t.Error("namespace not interned on the first pass")
	}
}
