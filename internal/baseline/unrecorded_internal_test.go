package baseline

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/reloader-operator/reloader/internal/lookup"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/workload"
)

// listOnly is a ListWatch whose first list is a LIST: its watch sends no initial events.
type listOnly struct{ *toolscache.ListWatch }

func (listOnly) IsWatchListSemanticsUnSupported() bool { return true }

// capturedIndex is a client.FieldIndexer that keeps the index function registered, for a fake
// client to index by.
type capturedIndex struct{ extract client.IndexerFunc }

func (c *capturedIndex) IndexField(_ context.Context, _ client.Object, _ string, extract client.IndexerFunc) error {
	c.extract = extract
	return nil
}

// A source change is looked up only in a namespace where a workload of the kind has no record:
// the index answers as the cache's store holds the workloads, through a record written and
// one removed, and before the first list is in says to look up; where there is one, the
// change is noted on it as before.
func TestChangesAreLookedUpOnlyWhereAWorkloadHasNoRecord(t *testing.T) {
	keys := reload.DefaultKeys()
	deployment := func(ns, name string, recorded bool) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name),
			ResourceVersion: "5", Annotations: map[string]string{keys.Auto: "true"}}}
		if recorded {
			d.Annotations[reload.RecordAnnotation] = "{}"
		}
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", EnvFrom: []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}}
		return d
	}
	recordedA, unrecordedB := deployment("a", "web", true), deployment("b", "web", false)
	listed := &appsv1.DeploymentList{Items: []appsv1.Deployment{*recordedA.DeepCopy(), *unrecordedB.DeepCopy()}}
	listed.ResourceVersion = "5"
	release := make(chan struct{})
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			<-release
			return listed.DeepCopy(), nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			return watch.NewFake(), nil
		},
	}
	informer := toolscache.NewSharedIndexInformer(listOnly{lw}, &appsv1.Deployment{}, 0, toolscache.Indexers{})
	unrecordedIn, err := indexUnrecorded(informer)
	if err != nil || unrecordedIn == nil {
		t.Fatalf("indexUnrecorded: nil %v, %v", unrecordedIn == nil, err)
	}
	if again, err := indexUnrecorded(informer); err != nil || again == nil {
		t.Fatalf("the same informer indexed again (another Baselines of the kind): %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go informer.RunWithContext(ctx)
	if !unrecordedIn("a") || !unrecordedIn("c") {
		t.Error("before the first list is in, a namespace is said to hold no workload without record: the lookup, which waits for that list, is skipped")
	}
	close(release)
	synced, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	if !toolscache.WaitForCacheSync(synced.Done(), informer.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	store := informer.GetIndexer()
	want := func(step string, a, b bool) {
		t.Helper()
		if got := unrecordedIn("a"); got != a {
			t.Errorf("%s: namespace a has a workload without record: %v, want %v", step, got, a)
		}
		if got := unrecordedIn("b"); got != b {
			t.Errorf("%s: namespace b has a workload without record: %v, want %v", step, got, b)
		}
		if unrecordedIn("c") {
			t.Errorf("%s: namespace c, empty, has a workload without record", step)
		}
	}
	want("added", false, true)

	// The lookup is asked only in b; there the change is noted on its workload.
	var idx capturedIndex
	if err := lookup.IndexWorkloads(context.Background(), &idx, workload.Deployment(), keys); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(recordedA.DeepCopy(), unrecordedB.DeepCopy()).
		WithIndex(&appsv1.Deployment{}, lookup.IndexSources, idx.extract).Build()
	asked := 0
	wt := Watcher{Kind: workload.Deployment(), Lookup: func() lookup.Lookup {
		asked++
		return lookup.Lookup{Client: c, Sources: []sourcecache.SourceType{sourcecache.ConfigMaps}, Policy: reload.Policy{Keys: keys}}
	}, unrecordedIn: unrecordedIn}
	var b Baselines
	for _, ns := range []string{"a", "b"} {
		old := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg", ResourceVersion: "10"}}
		now := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg", ResourceVersion: "11"}}
		before := asked
		b.changedFrom(context.Background(), wt, sourcecache.ConfigMaps, now, old)
		if looked := asked > before; looked != (ns == "b") {
			t.Errorf("a change in namespace %s looked up: %v, want %v", ns, looked, ns == "b")
		}
	}
	id := source.ID{Kind: source.ConfigMap, Name: "cfg"}
	if _, noted := b.m[unrecordedB.UID][id]; !noted {
		t.Errorf("the change in b was not noted on its workload without record: %v", b.m)
	}
	if len(b.m) != 1 {
		t.Errorf("notes on %d workloads, want 1 (b's): %v", len(b.m), b.m)
	}

	// The record written on b's workload and removed from a's: the index follows the store.
	if err := store.Update(deployment("b", "web", true)); err != nil {
		t.Fatal(err)
	}
	if err := store.Update(deployment("a", "web", false)); err != nil {
		t.Fatal(err)
	}
	want("records moved", true, false)
	if err := store.Delete(deployment("a", "web", false)); err != nil {
		t.Fatal(err)
	}
	want("deleted", false, false)
}
