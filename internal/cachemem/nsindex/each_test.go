package nsindex_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/cachemem/nsindex"
)

// informers is a cache.Informers of one informer, whatever the type asked.
type informers struct {
	cache.Informers
	informer toolscache.SharedIndexInformer
}

func (i informers) GetInformer(context.Context, client.Object, ...cache.InformerGetOption) (cache.Informer, error) {
	return i.informer, nil
}

// listOnly is a ListWatch whose first list is a LIST: its watch sends no initial events.
type listOnly struct{ *toolscache.ListWatch }

func (listOnly) IsWatchListSemanticsUnSupported() bool { return true }

// Each finds, in place, what a List in the namespace by the field would: once the informer's
// first list is in, and only for the type indexed (a List answers the rest).
func TestEachFindsWhatTheListWould(t *testing.T) {
	deployment := func(ns, name string, sources ...string) appsv1.Deployment {
		return appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Annotations: map[string]string{"sources": strings.Join(sources, ",")}}}
	}
	listed := &appsv1.DeploymentList{Items: []appsv1.Deployment{
		deployment("a", "web", "cfg", "other"), deployment("a", "api", "cfg"), deployment("a", "db", "other"),
		deployment("b", "web", "cfg"),
	}}
	listed.ResourceVersion = "1"
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
	// As controller-runtime's informers are: indexed by namespace.
	informer := toolscache.NewSharedIndexInformer(listOnly{lw}, &appsv1.Deployment{}, 0,
		toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	idx := nsindex.New(informers{informer: informer})
	const field = "sources"
	if err := idx.IndexField(context.Background(), &appsv1.Deployment{}, field, func(o client.Object) []string {
		return strings.FieldsFunc(o.GetAnnotations()["sources"], func(r rune) bool { return r == ',' })
	}); err != nil {
		t.Fatal(err)
	}
	each := func(list client.ObjectList, ns, value string) ([]string, bool) {
		var names []string
		ok := idx.Each(list, ns, field, value, func(o client.Object) { names = append(names, o.GetName()) })
		slices.Sort(names)
		return names, ok
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go informer.RunWithContext(ctx)
	if _, ok := each(&appsv1.DeploymentList{}, "a", "cfg"); ok {
		t.Error("answered before the informer's first list was in: a List would wait for it")
	}
	close(release)
	if !toolscache.WaitForCacheSync(ctxTimeout(t, 10*time.Second), informer.HasSynced) {
		t.Fatal("informer did not sync")
	}
	for _, tc := range []struct {
		ns, value string
		want      []string
	}{
		{"a", "cfg", []string{"api", "web"}},
		{"a", "other", []string{"db", "web"}},
		{"b", "cfg", []string{"web"}},
		{"b", "other", nil},
		{"c", "cfg", nil},
	} {
		got, ok := each(&appsv1.DeploymentList{}, tc.ns, tc.value)
		if !ok || !slices.Equal(got, tc.want) {
			t.Errorf("Each in %s by %s=%s: %v (answered %v), want %v", tc.ns, field, tc.value, got, ok, tc.want)
		}
	}
	for ns, want := range map[string]string{"a": "[api db web]", "b": "[web]", "c": "[]"} {
		var names []string
		ok := idx.EachIn(&appsv1.DeploymentList{}, ns, func(o client.Object) { names = append(names, o.GetName()) })
		if slices.Sort(names); !ok || fmt.Sprint(names) != want {
			t.Errorf("EachIn %s: %v (answered %v), want %s", ns, names, ok, want)
		}
	}
	if idx.Each(&appsv1.DeploymentList{}, "a", "no-such-field", "cfg", func(client.Object) {}) {
		t.Error("answered by a field with no index: a List would fail, and says why")
	}
	for _, list := range []client.ObjectList{&corev1.PodList{}, &unstructured.UnstructuredList{}} {
		if _, ok := each(list, "a", "cfg"); ok {
			t.Errorf("answered for %T, a type it has no index of", list)
		}
	}
	if (nsindex.Indexer{Cache: informers{informer: informer}}).Each(&appsv1.DeploymentList{}, "a", field, "cfg", func(client.Object) {}) {
		t.Error("an Indexer not made by New answered in place")
	}
}

func ctxTimeout(t *testing.T, d time.Duration) <-chan struct{} {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx.Done()
}
