package baseline

import (
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// A start-up baseline of a workload restricted to key a is hashed over key a: a change of
// another key made before its first reconcile is no change, a change of a is.
func TestBaselineOfRestrictedWorkload(t *testing.T) {
	id := source.ID{Kind: source.ConfigMap, Name: "cfg"}
	cached := func(a, b string) client.Object {
		o, err := sourcecache.ConfigMaps.Transform(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}, Data: map[string]string{"a": a, "b": b}})
		if err != nil {
			t.Fatal(err)
		}
		return o.(client.Object)
	}
	onlyA := func(_ source.ID, o client.Object) string {
		return sourcecache.ConfigMaps.HashOf(o, []string{"a"}, true)
	}
	before := cached("1", "1")
	tests := []struct {
		name   string
		now    client.Object
		noted  bool // the handlers noted the change on the workload (else they only handled it)
		reload bool
	}{
		{"other key changed, handled", cached("1", "2"), false, false},
		{"other key changed, noted", cached("1", "2"), true, false},
		{"listed key changed, handled", cached("2", "1"), false, true},
		{"listed key changed, noted", cached("2", "1"), true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Baselines
			b.setHandled("ns", id, before)
			if tt.noted {
				b.before(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{UID: "uid"}}, id, before, "")
				b.setHandled("ns", id, tt.now)
			}
			current := map[source.ID]string{id: onlyA(id, tt.now)}
			base := b.Of(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{UID: "uid", Namespace: "ns"}}, current, onlyA, noRV)
			changed, _ := reload.Diff(base, base != nil, current, reload.Events{})
			if (len(changed) > 0) != tt.reload {
				t.Errorf("baseline %v: changed %v, want reload %v", base, changed, tt.reload)
			}
		})
	}
}

// A workload that reaches the cache after a change of its source the handlers already heard
// (each kind has its own watch) is compared with the content before that change when it was
// created before it, in resourceVersion order; one created after it (re-created in the same
// second, say) is not, and neither is one whose change is older than the window.
func TestBaselineOfWorkloadCreatedJustBeforeAChange(t *testing.T) {
	id, before, after := twoContents(t)
	now := time.Now()
	tests := []struct {
		name     string
		addRV    string // the workload's first ADD event; "" when not heard
		cachedRV string // the workload's cached copy
		changeAt time.Time
		reload   bool
	}{
		{"created before the change, cached after its status moved on", "100", "120", now, true},
		{"created before the change, ADD not heard yet, cached copy older than the change", "", "104", now, true},
		{"created before the change, ADD not heard yet, cached copy newer", "", "120", now, false},
		{"created after the change", "106", "106", now, false},
		{"change older than the window", "100", "120", now.Add(-2 * recentWindow), false},
		{"resourceVersions that are no numbers", "", "x", now, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Baselines
			b.changedRecently("ns", id, before, "105", tt.changeAt)
			b.setHandled("ns", id, after)
			w := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{UID: "uid", Namespace: "ns", ResourceVersion: tt.cachedRV}}
			if tt.addRV != "" {
				b.created("uid", tt.addRV, now)
			}
			current := map[source.ID]string{id: whole(id, after)}
			base := b.Of(w, current, whole, func(source.ID) string { return "105" })
			diff, _ := reload.Diff(base, base != nil, current, reload.Events{})
			if (len(diff) > 0) != tt.reload {
				t.Errorf("baseline %v: changed %v, want reload %v", base, diff, tt.reload)
			}
		})
	}
}

// The kept changes and creations are bounded: a burst over more sources or workloads than the
// tables hold keeps what fits and drops nothing it holds before its window ends.
func TestRecentBaselinesBounded(t *testing.T) {
	var b Baselines
	now := time.Now()
	for i := range recentSources + 10 {
		// Spread over as many namespaces as fill the table at their share each.
		ns := "ns" + strconv.Itoa(i%recentShare)
		b.changedRecently(ns, source.ID{Kind: source.ConfigMap, Name: "cfg" + strconv.Itoa(i)}, nil, "7", now)
	}
	for i := range recentCreations + 10 {
		b.created(types.UID(strconv.Itoa(i)), "7", now)
	}
	if len(b.recent) != recentSources || len(b.creations) != recentCreations {
		t.Errorf("kept %d sources' changes and %d creations, want %d and %d", len(b.recent), len(b.creations), recentSources, recentCreations)
	}
	later := now.Add(2 * recentWindow)
	b.changedRecently("ns", source.ID{Kind: source.ConfigMap, Name: "new"}, nil, "8", later)
	b.created("new", "8", later)
	if len(b.recent) != 1 || len(b.creations) != 1 {
		t.Errorf("after the window: %d sources' changes and %d creations kept, want the 1 new of each", len(b.recent), len(b.creations))
	}
}

// A namespace's burst over thousands of sources keeps its share, and never costs another
// namespace the changes it keeps: B's change heard after A's flood is kept, and so is one
// heard before it.
func TestRecentBaselinesShareByNamespace(t *testing.T) {
	var b Baselines
	now := time.Now()
	before := source.ID{Kind: source.ConfigMap, Name: "before"}
	after := source.ID{Kind: source.ConfigMap, Name: "after"}
	b.changedRecently("tenant-b", before, nil, "5", now)
	for i := range 5000 {
		b.changedRecently("tenant-a", source.ID{Kind: source.ConfigMap, Name: "cfg" + strconv.Itoa(i)}, nil, "7", now)
	}
	// Other namespaces fill the rest of the table.
	for i := range recentSources {
		ns := "tenant-" + strconv.Itoa(i%4)
		b.changedRecently(ns, source.ID{Kind: source.ConfigMap, Name: "cfg" + strconv.Itoa(i)}, nil, "7", now)
	}
	b.changedRecently("tenant-b", after, nil, "9", now)
	if n := b.recentShares.Of("tenant-a"); n > recentSources/recentShare {
		t.Errorf("tenant-a keeps %d sources' changes, want at most its share %d", n, recentSources/recentShare)
	}
	if len(b.recent) > recentSources || len(b.recent) != b.recentShares.Len() {
		t.Errorf("kept %d sources' changes (%d counted), want at most %d", len(b.recent), b.recentShares.Len(), recentSources)
	}
	for _, id := range []source.ID{before, after} {
		if _, ok := b.changedAfter("tenant-b", id, 1, now); !ok {
			t.Errorf("tenant-b's change of %s was not kept past the others' bursts", id)
		}
	}
}

func noRV(source.ID) string { return "" }

// twoContents are ConfigMap ns/cfg as the cache holds it with key a at "1", then at "2".
func twoContents(t *testing.T) (id source.ID, before, after client.Object) {
	t.Helper()
	cached := func(v string) client.Object {
		o, err := sourcecache.ConfigMaps.Transform(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}, Data: map[string]string{"a": v}})
		testutil.Must(t, err)
		return o.(client.Object)
	}
	return source.ID{Kind: source.ConfigMap, Name: "cfg"}, cached("1"), cached("2")
}

// whole hashes a cached ConfigMap whole.
func whole(_ source.ID, o client.Object) string { return sourcecache.ConfigMaps.HashOf(o, nil, false) }

// A change the handlers have not heard yet, or heard and noted on the workload, is a change
// since the workload was seen, unless the workload's ADD event shows it was created after it.
func TestBaselineOfWorkloadCreatedAfterAnUnheardChange(t *testing.T) {
	id, before, after := twoContents(t)
	tests := []struct {
		name   string
		addRV  string // "": ADD not heard (a workload of the first list, say)
		noted  bool   // the handlers heard the change and noted it on the workload
		reload bool
	}{
		{"created before the change", "100", false, true},
		{"created after the change", "110", false, false},
		{"creation unknown", "", false, true},
		{"created before the change, noted", "100", true, true},
		{"created after the change, noted", "110", true, false},
		{"creation unknown, noted", "", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Baselines
			b.setHandled("ns", id, before) // the change to after is in the cache, not heard
			if tt.noted {
				b.before(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{UID: "uid", ResourceVersion: "120"}}, id, before, "105")
				b.setHandled("ns", id, after)
			}
			if tt.addRV != "" {
				b.created("uid", tt.addRV, time.Now())
			}
			w := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{UID: "uid", Namespace: "ns", ResourceVersion: "120"}}
			current := map[source.ID]string{id: whole(id, after)}
			base := b.Of(w, current, whole, func(source.ID) string { return "105" })
			diff, _ := reload.Diff(base, base != nil, current, reload.Events{})
			if (len(diff) > 0) != tt.reload {
				t.Errorf("baseline %v: changed %v, want reload %v", base, diff, tt.reload)
			}
		})
	}
}
