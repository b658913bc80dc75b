package shard_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/reloader-operator/reloader/internal/shard"
	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testenv/clustertest"
	"github.com/reloader-operator/reloader/internal/testutil"
)

var clientset *kubernetes.Clientset

// One real kube-apiserver for the package, with the API server applying shard selectors.
func TestMain(m *testing.M) {
	clustertest.Main(m, testenv.Options{APIServerFlags: map[string]string{"feature-gates": "ShardedListAndWatch=true"}},
		func(c *testenv.Cluster) (err error) {
			clientset, err = kubernetes.NewForConfig(c.Config)
			return err
		})
}

// The objects of a shard just taken reach the informer's handlers as adds that are not
// initial, after the list that brought them has returned: Relisted tells them from objects
// created since, so that they do not look created (--reload-on-create).
func TestRelistedAddsAreNotCreations(t *testing.T) {
	for _, serverSide := range []bool{true, false} {
		t.Run(fmt.Sprintf("serverSide=%v", serverSide), func(t *testing.T) { testRelisted(t, serverSide) })
	}
}

func testRelisted(t *testing.T, serverSide bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	ns := fmt.Sprintf("relist-%04d", rand.IntN(10000))
	if _, err := clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = clientset.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	configMap := func(name string) {
		t.Helper()
		_, err := clientset.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		testutil.Must(t, err)
	}
	configMap("before")

	space, _ := shard.NewSpace(4)
	f := shard.NewFilter(space, serverSide)
	f.NamespaceAdded(ns)
	inner := toolscache.NewListWatchFromClient(clientset.CoreV1().RESTClient(), "configmaps", ns, fields.Everything())
	// relists counts the lists from scratch: lists and watch lists (not the exact-version
	// lists of a splice, nor the watches from a resourceVersion).
	var relists atomic.Int32
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			if o.ResourceVersionMatch != metav1.ResourceVersionMatchExact {
				relists.Add(1)
			}
			return inner.ListWithContext(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if o.SendInitialEvents != nil && *o.SendInitialEvents {
				relists.Add(1)
			}
			return inner.WatchWithContext(ctx, o)
		},
	}
	inf := f.NewInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{})
	type add struct {
		name              string
		initial, relisted bool
	}
	adds := make(chan add, 10)
	_, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{AddFunc: func(o any, initial bool) {
		cm := o.(*corev1.ConfigMap)
		adds <- add{cm.Name, initial, f.Relisted(cm)}
	}})
	testutil.Must(t, err)
	go inf.Run(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("no first list")
	}
	next := func() add {
		t.Helper()
		select {
		case a := <-adds:
			return a
		case <-ctx.Done():
			t.Fatal("no add")
			return add{}
		}
	}

	// Owning nothing, the first list held nothing; the shard taken, "before" comes with its
	// list, then "after" is created.
	first := relists.Load()
	f.Add(space.Of(ns))
	if a := next(); a != (add{name: "before", relisted: true}) {
		t.Errorf("the shard's list: %+v, want before, relisted", a)
	}
	configMap("after")
	if a := next(); a != (add{name: "after"}) {
		t.Errorf("created since: %+v, want after, not relisted", a)
	}
	// Given up and taken again: both come with the new list.
	f.Remove(space.Of(ns))
	for len(inf.GetStore().ListKeys()) > 0 {
		if ctx.Err() != nil {
			t.Fatal("the shard given up stays in the cache")
		}
		time.Sleep(50 * time.Millisecond)
	}
	f.Add(space.Of(ns))
	got := map[add]bool{next(): true, next(): true}
	if !got[add{name: "before", relisted: true}] || !got[add{name: "after", relisted: true}] {
		t.Errorf("the shard's list again: %v, want before and after, relisted", got)
	}
	// The hand-overs were spliced into the watch: the informer never listed again, so
	// client-go's relist backoff never delayed them.
	if n := relists.Load() - first; n != 0 {
		t.Errorf("the informer listed again %d times over three hand-overs", n)
	}
}

// A shard taken and given up again at once, over and over, leaves none of its objects in the
// cache: the deletes of a shard given up reach what the informer holds, even what it has not
// taken into its store yet when the shard goes.
func TestQuickHandOversLeaveNothingBehind(t *testing.T) {
	for _, serverSide := range []bool{true, false} {
		t.Run(fmt.Sprintf("serverSide=%v", serverSide), func(t *testing.T) { testQuickHandOvers(t, serverSide) })
	}
}

func testQuickHandOvers(t *testing.T, serverSide bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	ns := fmt.Sprintf("quick-%04d", rand.IntN(10000))
	if _, err := clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = clientset.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	const objects = 300
	for i := range objects {
		_, err := clientset.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%03d", i)}}, metav1.CreateOptions{})
		testutil.Must(t, err)
	}

	space, _ := shard.NewSpace(4)
	f := shard.NewFilter(space, serverSide)
	f.NamespaceAdded(ns)
	// An index that takes its time makes the store lag behind the watch, as in a busy process.
	slow := toolscache.Indexers{"slow": func(any) ([]string, error) {
		time.Sleep(5 * time.Millisecond)
		return nil, nil
	}}
	inf := f.NewInformer(toolscache.NewListWatchFromClient(clientset.CoreV1().RESTClient(), "configmaps", ns, fields.Everything()),
		&corev1.ConfigMap{}, 0, slow)
	go inf.Run(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("no first list")
	}
	i := space.Of(ns)
	for range 40 {
		f.Add(i)
		time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
		f.Remove(i)
		time.Sleep(time.Duration(rand.IntN(10)) * time.Millisecond)
	}
	testutil.Eventually(t, "the shard given up to leave the cache", func() error {
		if n := len(inf.GetStore().ListKeys()); n > 0 {
			return fmt.Errorf("%d of its %d ConfigMaps still cached", n, objects)
		}
		return nil
	})
	// And taken for good, it is all there.
	all, err := clientset.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	testutil.Must(t, err)
	f.Add(i)
	testutil.Eventually(t, "the shard taken to fill the cache", func() error {
		if n := len(inf.GetStore().ListKeys()); n != len(all.Items) {
			return fmt.Errorf("%d of %d ConfigMaps cached", n, len(all.Items))
		}
		return nil
	})
}
