package planwebhook_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/app"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/testutil/objects"
)

// TestPlansAWorkloadNotRecordedYet: a Deployment that reloader holds in its cache but has not
// recorded yet (its first record waits for its turn under --first-sight-rate; as one whose
// record reloader has written but whose cached copy is older) rolls when its ConfigMap
// changes: the change is noted against the content reloader saw, not taken as the first
// sighting. The webhook says so before the write, and the controller then rolls it.
func TestPlansAWorkloadNotRecordedYet(t *testing.T) {
	ctx := context.Background()
	ns := "hook-unrecorded"
	var mu sync.Mutex
	waited := map[string]bool{}
	hear := func(p app.Parts) error {
		p.Metrics.Hook = func(r metrics.Reconcile) {
			if r.Kind == "Deployment" && r.Outcome == metrics.OutcomeWaiting {
				mu.Lock()
				waited[r.Name] = true
				mu.Unlock()
			}
		}
		return nil
	}
	// Reloads unpaced; one first record every 1000 s.
	s := serveWith(t, ns, hear, func(o *options.Options) { o.ReloadRate, o.FirstSightRate = 0, 0.001 })
	c := s.c
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}, Data: map[string]string{"k": "v1"}}
	testutil.Must(t, c.Create(ctx, cm))
	first, second := objects.AutoDeployment(ns, "first", cm.Name), objects.AutoDeployment(ns, "second", cm.Name)
	testutil.Must(t, c.Create(ctx, first))
	testutil.Eventually(t, "first recorded by reloader", func() error {
		if _, ok := getDeployment(t, c, first).Annotations[reload.RecordAnnotation]; !ok {
			return fmt.Errorf("no record yet")
		}
		return nil
	})
	// first took the only first-sight token: second waits, in reloader's cache, unrecorded.
	testutil.Must(t, c.Create(ctx, second))
	testutil.Eventually(t, "second's first record waiting", func() error {
		mu.Lock()
		defer mu.Unlock()
		if !waited[second.Name] {
			return fmt.Errorf("not reconciled yet")
		}
		return nil
	})
	before := getDeployment(t, c, second)
	if _, ok := before.Annotations[reload.RecordAnnotation]; ok {
		t.Fatal("second was recorded: its first record did not wait")
	}

	s.seen.take()
	testutil.Must(t, update(t, c, cm, func(l *corev1.ConfigMap) { l.Data["k"] = "v2" }))
	want := "this update will roll 2 workloads, 2 pods, in 1 namespace"
	if w := s.seen.take(); len(w) != 1 || w[0] != want {
		t.Errorf("warnings %q, want [%q]", w, want)
	}
	// What the webhook said is what the controller does.
	testutil.Eventually(t, "second rolled", func() error {
		now := getDeployment(t, c, second)
		if equality.Semantic.DeepEqual(now.Spec.Template, before.Spec.Template) {
			return fmt.Errorf("its template is unchanged")
		}
		return nil
	})
}

func getDeployment(t *testing.T, c client.Client, d *appsv1.Deployment) *appsv1.Deployment {
	t.Helper()
	out := &appsv1.Deployment{}
	testutil.Must(t, c.Get(context.Background(), client.ObjectKeyFromObject(d), out))
	return out
}
