package nsindex_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/cachemem/nsindex"
	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testenv/clustertest"
	"github.com/reloader-operator/reloader/internal/testutil"
)

var cluster *testenv.Cluster

func TestMain(m *testing.M) {
	clustertest.Main(m, testenv.Options{}, func(c *testenv.Cluster) error {
		cluster = c
		return nil
	})
}

const field = "test.first-env-source"

// firstSource indexes a Pod by the ConfigMap its first container's envFrom names.
func firstSource(o client.Object) []string {
	p := o.(*corev1.Pod)
	var out []string
	for _, e := range p.Spec.Containers[0].EnvFrom {
		out = append(out, e.ConfigMapRef.Name)
	}
	return out
}

// TestNamespacedLookupsAsIndexField: a List in a namespace by the indexed field finds exactly
// that namespace's objects, through controller-runtime's own cache reader, and the index
// holds one key per value and namespace: none for lists across namespaces.
func TestNamespacedLookupsAsIndexField(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := client.New(cluster.Config, client.Options{})
	testutil.Must(t, err)
	for _, ns := range []string{"nsindex-a", "nsindex-b"} {
		testutil.Must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
		for i, src := range []string{"shared", "shared", "own-" + ns} {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("p%d", i)},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x",
					EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: src}}}}}}}}
			testutil.Must(t, c.Create(ctx, pod))
		}
	}

	ca, err := cache.New(cluster.Config, cache.Options{})
	testutil.Must(t, err)
	testutil.Must(t, (nsindex.Indexer{Cache: ca}).IndexField(ctx, &corev1.Pod{}, field, firstSource))
	go func() { _ = ca.Start(ctx) }()
	syncCtx, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	if !ca.WaitForCacheSync(syncCtx) {
		t.Fatal("cache never synced")
	}

	for ns, want := range map[string][]string{"nsindex-a": {"p0", "p1"}, "nsindex-b": {"p0", "p1"}} {
		var pods corev1.PodList
		testutil.Must(t, ca.List(ctx, &pods, client.InNamespace(ns), client.MatchingFields{field: "shared"}))
		var got []string
		for _, p := range pods.Items {
			if p.Namespace != ns {
				t.Errorf("List in %s returns %s/%s", ns, p.Namespace, p.Name)
			}
			got = append(got, p.Name)
		}
		if slices.Sort(got); !slices.Equal(got, want) {
			t.Errorf("List in %s by %s=shared: %v, want %v", ns, field, got, want)
		}
	}
	var own corev1.PodList
	if err := ca.List(ctx, &own, client.InNamespace("nsindex-b"), client.MatchingFields{field: "own-nsindex-a"}); err != nil || len(own.Items) != 0 {
		t.Errorf("another namespace's value matches: %d pods, %v", len(own.Items), err)
	}

	informer, err := ca.GetInformer(ctx, &corev1.Pod{})
	testutil.Must(t, err)
	keys := informer.(toolscache.SharedIndexInformer).GetIndexer().ListIndexFuncValues(nsindex.IndexName(field))
	slices.Sort(keys)
	want := []string{"nsindex-a/own-nsindex-a", "nsindex-a/shared", "nsindex-b/own-nsindex-b", "nsindex-b/shared"}
	if !slices.Equal(keys, want) {
		t.Errorf("index keys %v, want %v", keys, want)
	}
	for _, k := range keys {
		if strings.HasPrefix(k, "__all_namespaces/") {
			t.Errorf("index holds the all-namespaces key %q", k)
		}
	}
}
