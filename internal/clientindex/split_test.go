package clientindex_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/reloader-operator/reloader/internal/clientindex"
	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// TestSplitReadsLiveKindsThroughTheIndexAndReusesFreshLists: reads of the kinds named go to
// the live client with its indexes, others to the other client; lookups by index within the
// reuse period share one list from the API server, and a later one lists again and sees what
// was created meanwhile.
func TestSplitReadsLiveKindsThroughTheIndexAndReusesFreshLists(t *testing.T) {
	ctx := context.Background()
	cluster, err := testenv.Start(ctx, testenv.Options{})
	testutil.Must(t, err)
	t.Cleanup(func() { _ = cluster.Stop() })
	direct, err := client.New(cluster.Config, client.Options{})
	testutil.Must(t, err)
	var liveLists, otherLists atomic.Int32
	live, err := client.NewWithWatch(cluster.Config, client.Options{})
	testutil.Must(t, err)
	liveCounted := interceptor.NewClient(live, interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, o ...client.ListOption) error {
		liveLists.Add(1)
		return c.List(ctx, l, o...)
	}})
	otherCounted := interceptor.NewClient(live, interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, o ...client.ListOption) error {
		otherLists.Add(1)
		return c.List(ctx, l, o...)
	}})
	split, err := clientindex.NewSplit(otherCounted, liveCounted, &corev1.ConfigMap{})
	testutil.Must(t, err)
	byTeam := func(o client.Object) []string { return []string{o.GetLabels()["team"]} }
	testutil.Must(t, split.Live.IndexField(ctx, &corev1.ConfigMap{}, "by-team", byTeam))
	const reuse = 2 * time.Second // long enough that a loaded machine does not outlast it between two lookups
	split.Live.ReuseLists(reuse)
	create := func(name, team string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{"team": team}}}
		testutil.Must(t, direct.Create(ctx, cm))
	}
	team := func(name string) []string {
		t.Helper()
		var list corev1.ConfigMapList
		testutil.Must(t, split.List(ctx, &list, client.InNamespace("default"), client.MatchingFields{"by-team": name}))
		var out []string
		for _, cm := range list.Items {
			out = append(out, cm.Name)
		}
		slices.Sort(out)
		return out
	}
	create("a-1", "a")
	create("b-1", "b")
	if got := team("a"); !slices.Equal(got, []string{"a-1"}) {
		t.Errorf("team a: %v", got)
	}
	if got := team("b"); !slices.Equal(got, []string{"b-1"}) {
		t.Errorf("team b: %v", got)
	}
	if n := liveLists.Load(); n != 1 {
		t.Errorf("%d lists from the API server for two lookups within the reuse period; want 1", n)
	}
	create("a-2", "a")
	time.Sleep(reuse)
	if got := team("a"); !slices.Equal(got, []string{"a-1", "a-2"}) {
		t.Errorf("team a after the reuse period: %v", got)
	}
	if n := liveLists.Load(); n != 2 {
		t.Errorf("%d lists from the API server; want 2", n)
	}
	// Within the reuse period, a lookup made for a change after the list was taken lists
	// again: a ConfigMap created before the change is seen (degraded mode's late workloads).
	create("a-3", "a")
	var changed corev1.ConfigMap
	testutil.Must(t, direct.Get(ctx, client.ObjectKey{Namespace: "default", Name: "a-3"}, &changed))
	var atChange corev1.ConfigMapList
	testutil.Must(t, split.List(clientindex.AtLeast(ctx, changed.ResourceVersion), &atChange, client.InNamespace("default"), client.MatchingFields{"by-team": "a"}))
	if len(atChange.Items) != 3 || liveLists.Load() != 3 {
		t.Errorf("a lookup at the change: %d ConfigMaps, %d lists from the API server; want 3 and 3", len(atChange.Items), liveLists.Load())
	}
	// One made for a change the list already holds shares it.
	testutil.Must(t, split.List(clientindex.AtLeast(ctx, changed.ResourceVersion), &atChange, client.InNamespace("default"), client.MatchingFields{"by-team": "a"}))
	if n := liveLists.Load(); n != 3 {
		t.Errorf("%d lists from the API server for a lookup the fresh list covers; want 3", n)
	}
	time.Sleep(reuse)
	var cm corev1.ConfigMap
	if err := split.Get(ctx, client.ObjectKey{Namespace: "default", Name: "a-2"}, &cm); err != nil {
		t.Errorf("live Get: %v", err)
	}
	var secrets corev1.SecretList
	testutil.Must(t, split.List(ctx, &secrets, client.InNamespace("default")))
	if otherLists.Load() != 1 || liveLists.Load() != 3 {
		t.Errorf("a Secret list went to the live client (other %d, live %d)", otherLists.Load(), liveLists.Load())
	}
}
