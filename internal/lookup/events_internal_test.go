package lookup

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/reloader-operator/reloader/internal/sourcecache"
)

// TestOneSourceEventIsObservedOnce: five workload kinds watch ConfigMaps through one
// SourceEvents; one update of a ConfigMap is observed once (it was once per kind, five times,
// when the observers were each kind's predicates), and still reaches every kind's mapper.
// A kind whose predicates stop the event gets none; the observers hear it all the same.
func TestOneSourceEventIsObservedOnce(t *testing.T) {
	ctx := context.Background()
	informers := &informertest.FakeInformers{Scheme: scheme.Scheme}
	var created, updated, deleted int
	events := NewSourceEvents(func(st sourcecache.SourceType) predicate.Predicate {
		return predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { created++; return true },
			UpdateFunc: func(event.UpdateEvent) bool { updated++; return true },
			DeleteFunc: func(event.DeleteEvent) bool { deleted++; return true },
		}
	})
	noMapping := func(context.Context, client.Object) []Queued { return nil }
	var mappers []*SourceMapper
	for _, kind := range []string{"Deployment", "StatefulSet", "DaemonSet", "CronJob", "Job"} {
		m := NewSourceMapper(MapQueueName(kind, sourcecache.ConfigMaps), noMapping)
		mappers = append(mappers, m)
		src := events.Source(informers, sourcecache.ConfigMaps, m, sourcecache.LaterSources())
		if err := src.Start(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	stopped := NewSourceMapper("stopped", noMapping)
	_ = events.Source(informers, sourcecache.ConfigMaps, stopped, predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }})

	informer, err := informers.FakeInformerFor(ctx, &corev1.ConfigMap{})
	if err != nil {
		t.Fatal(err)
	}
	cm := func(rv, v string) *corev1.ConfigMap {
		o, err := sourcecache.ConfigMaps.Transform(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg", ResourceVersion: rv}, Data: map[string]string{"k": v}})
		if err != nil {
			t.Fatal(err)
		}
		return o.(*corev1.ConfigMap)
	}
	old, cur := cm("1", "a"), cm("2", "b")
	informer.Update(old, cur)
	if created != 0 || updated != 1 || deleted != 0 {
		t.Fatalf("one update observed %d times (creates %d, deletes %d), want once", updated, created, deleted)
	}
	for _, m := range mappers {
		if n := m.queue.Len(); n != 1 {
			t.Errorf("%d sources queued for a lookup of one kind, want 1", n)
		}
	}
	if n := stopped.queue.Len(); n != 0 {
		t.Errorf("a kind whose predicate stops the update queued %d lookups", n)
	}
	informer.Delete(cur)
	if deleted != 1 {
		t.Errorf("one delete observed %d times, want once", deleted)
	}
}
