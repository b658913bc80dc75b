package controller_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestServerNeverSendsSelfLink: the cache keeps a source's packed hashes in metadata.selfLink
// on the ground that the API server never sends one. A client that sets it, to pass a marked
// object to reloader, finds it gone on read, list and watch alike.
func TestServerNeverSendsSelfLink(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	cm := configMap(ns, "marked", map[string]string{"k": "v"})
	cm.SelfLink = "reloader-cache 0000 "
	create(t, cm)
	if got := get(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "marked"}}); got.SelfLink != "" {
		t.Errorf("GET returns selfLink %q", got.SelfLink)
	}
	var list corev1.ConfigMapList
	if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, o := range list.Items {
		if o.SelfLink != "" {
			t.Errorf("LIST returns selfLink %q for %s", o.SelfLink, o.Name)
		}
	}
	w, err := client.NewWithWatch(restConfig, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	// A watch without a resourceVersion starts with the objects there now: one the API server
	// ends early (under load) is opened again, and starts again.
	watcher, err := w.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { watcher.Stop() }()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, open := <-watcher.ResultChan():
			if !open {
				if watcher, err = w.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns)); err != nil {
					t.Fatal(err)
				}
				continue
			}
			o, ok := ev.Object.(*corev1.ConfigMap)
			if !ok {
				t.Fatalf("WATCH sends %T %+v", ev.Object, ev.Object)
			}
			if o.SelfLink != "" {
				t.Errorf("WATCH sends selfLink %q for %s", o.SelfLink, o.Name)
			}
			if o.Name == "marked" {
				return
			}
		case <-timeout:
			t.Fatal("WATCH never sent the ConfigMap")
		}
	}
}
