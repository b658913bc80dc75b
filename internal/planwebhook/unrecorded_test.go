package planwebhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/app"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/planwebhook"
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

// recordless reads the cache as it is between reloader's write of a Deployment's first record
// and the watch event that brings it back: without the record.
type recordless struct{ client.Client }

func withoutRecord(ann map[string]string) map[string]string {
	out := maps.Clone(ann)
	delete(out, reload.RecordAnnotation)
	return out
}

func (r recordless) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := r.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if d, ok := obj.(*appsv1.Deployment); ok {
		d.Annotations = withoutRecord(d.Annotations) // a map of its own: the cache's is shared
	}
	return nil
}

func (r recordless) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := r.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if l, ok := list.(*appsv1.DeploymentList); ok {
		for i := range l.Items {
			l.Items[i].Annotations = withoutRecord(l.Items[i].Annotations)
		}
	}
	return nil
}

// TestPlansAWorkloadWhoseRecordIsNotCachedYet: asked right after reloader wrote a workload's
// first record, before its cache has it back, the webhook plans what the controller does
// (it notes the write against the content it recorded, and rolls): the update rolls the
// workload.
func TestPlansAWorkloadWhoseRecordIsNotCachedYet(t *testing.T) {
	ctx := context.Background()
	ns := "hook-record-in-flight"
	var h *planwebhook.Handler
	s := serveWith(t, ns, func(p app.Parts) error {
		h = planwebhook.NewHandler(p)
		h.Controller.Reader = recordless{h.Controller.Reader}
		return nil
	})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}, Data: map[string]string{"k": "v1"}}
	testutil.Must(t, s.c.Create(ctx, cm))
	d := objects.AutoDeployment(ns, "app", cm.Name)
	testutil.Must(t, s.c.Create(ctx, d))
	testutil.Eventually(t, "the Deployment recorded by reloader", func() error {
		if _, ok := getDeployment(t, s.c, d).Annotations[reload.RecordAnnotation]; !ok {
			return fmt.Errorf("no record yet")
		}
		return nil
	})
	testutil.Eventually(t, "reloader's cache synced", func() error {
		if !h.Ready() {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	live := &corev1.ConfigMap{}
	testutil.Must(t, s.c.Get(ctx, client.ObjectKeyFromObject(cm), live))
	changed := live.DeepCopy()
	changed.Data["k"] = "v2"
	req := request(t, "ConfigMap", ns, admissionv1.Update, changed)
	old, err := json.Marshal(live)
	testutil.Must(t, err)
	req.OldObject.Raw = old
	resp := h.Handle(ctx, req)
	want := "this update will roll 1 workload, 1 pod, in 1 namespace"
	if !resp.Allowed || len(resp.Warnings) != 1 || resp.Warnings[0] != want {
		t.Errorf("allowed %v, warnings %q; want allowed with [%q]", resp.Allowed, resp.Warnings, want)
	}
}
