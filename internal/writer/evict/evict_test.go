package evict

import (
	"context"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/workload"
	"github.com/reloader-operator/reloader/internal/writer/writertest"
)

var now = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

// The restart strategy read from the annotation: evict only when asked for, enabled, and the
// kind can be evicted; bad input is reported only when a reload is due.
func TestModeOf(t *testing.T) {
	sts := func(v string) client.Object {
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"}}
		if v != "" {
			s.Annotations = map[string]string{reload.RestartStrategyAnnotation: v}
		}
		return s
	}
	for _, tc := range []struct {
		name    string
		kind    workload.Kind
		obj     client.Object
		enabled bool
		reloads bool
		want    Mode
		invalid int
	}{
		{"none", workload.StatefulSet(), sts(""), true, true, Rollout, 0},
		{"evict", workload.StatefulSet(), sts("evict"), true, true, Evict, 0},
		{"evict, not enabled", workload.StatefulSet(), sts("evict"), false, true, Off, 0},
		{"bad value, reload due", workload.StatefulSet(), sts("sideways"), true, true, Rollout, 1},
		{"bad value, nothing due", workload.StatefulSet(), sts("sideways"), true, false, Rollout, 0},
		{"kind that can't be evicted", workload.CronJob(), sts("evict"), true, true, Rollout, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := &writertest.Reporter{}
			e := &Restarter{Kind: tc.kind, Enabled: tc.enabled, Now: func() time.Time { return now }, Report: rep}
			if got := e.ModeOf(context.Background(), tc.obj, tc.reloads); got != tc.want || len(rep.Invalids) != tc.invalid {
				t.Errorf("mode %v, %d invalid; want %v, %d", got, len(rep.Invalids), tc.want, tc.invalid)
			}
		})
	}
}

// statefulSet restarting by eviction since `since`, for the record on it.
func statefulSet(replicas int32, since time.Time) *appsv1.StatefulSet {
	rec := reload.Record{"configmap/conf": "h2"}
	ev := reload.Evicting{Since: since, Record: reload.RecordDigest(rec.Encode())}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "db", UID: "sts-1", Annotations: map[string]string{
			reload.RestartStrategyAnnotation: "evict", reload.RecordAnnotation: rec.Encode(), reload.EvictingAnnotation: ev.Encode()}},
		Spec: appsv1.StatefulSetSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
	}
}

func pod(name string, created time.Time, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"app": "db"},
			CreationTimestamp: metav1.NewTime(created),
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "sts-1", Controller: new(true)}}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

func restarter(c client.Client, rep *writertest.Reporter) *Restarter {
	return &Restarter{Client: c, Kind: workload.StatefulSet(), Enabled: true, Now: func() time.Time { return now }, Report: rep}
}

// Each step evicts the oldest pod created before the restart, once every pod is ready; a pod
// not ready holds the next eviction; with none left the restart ends, its annotation removed.
func TestStepEvictsTheOldestPodThenEnds(t *testing.T) {
	since := now.Add(-time.Minute)
	sts := statefulSet(2, since)
	stray := pod("stray", since.Add(-time.Hour), true)
	stray.OwnerReferences = nil // not the StatefulSet's: never evicted
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).
		WithObjects(sts, pod("db-0", since.Add(-2*time.Hour), true), pod("db-1", since.Add(-time.Hour), true), stray).Build()
	rep := &writertest.Reporter{}
	e := restarter(c, rep)
	ctx := context.Background()
	read := func() *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(sts), s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	gone := func(name string) bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Namespace: "a", Name: name}, &corev1.Pod{}))
	}

	res, outcome, err := e.Step(ctx, read(), Evict, reconcile.Result{}, metrics.OutcomeUnchanged)
	if err != nil || outcome != metrics.OutcomeReloaded || res.RequeueAfter != time.Second || !gone("db-0") || gone("db-1") {
		t.Fatalf("first step: %v %s %v, db-0 gone %v, db-1 gone %v; want db-0 evicted", res, outcome, err, gone("db-0"), gone("db-1"))
	}
	// db-0 comes back, not ready yet: the restart waits for it.
	if err := c.Create(ctx, pod("db-0", now, false)); err != nil {
		t.Fatal(err)
	}
	res, outcome, err = e.Step(ctx, read(), Evict, reconcile.Result{}, metrics.OutcomeUnchanged)
	if err != nil || outcome != metrics.OutcomeUnchanged || res.RequeueAfter != reload.EvictPoll || gone("db-1") {
		t.Fatalf("step with a pod not ready: %v %s %v, db-1 gone %v; want a wait", res, outcome, err, gone("db-1"))
	}
	p := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "a", Name: "db-0"}, p); err != nil {
		t.Fatal(err)
	}
	p.Status.Conditions[0].Status = corev1.ConditionTrue
	if err := c.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Step(ctx, read(), Evict, reconcile.Result{}, metrics.OutcomeUnchanged); err != nil || !gone("db-1") {
		t.Fatalf("step once ready: %v, db-1 gone %v", err, gone("db-1"))
	}
	if err := c.Create(ctx, pod("db-1", now, true)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Step(ctx, read(), Evict, reconcile.Result{}, metrics.OutcomeUnchanged); err != nil {
		t.Fatal(err)
	}
	if _, ok := read().Annotations[reload.EvictingAnnotation]; ok {
		t.Error("restart done, annotation left")
	}
	if gone("stray") {
		t.Error("a pod the StatefulSet does not control was evicted")
	}
	want := []string{"StatefulSet/evict-pod", "StatefulSet/evict-pod", "StatefulSet/evict-done"}
	if !slices.Equal(rep.Actions, want) {
		t.Errorf("actions %v; want %v", rep.Actions, want)
	}
	if reasons := rep.Reasons(); !slices.Equal(reasons, []string{ReasonEvicting, ReasonEvicting, ReasonRestarted}) {
		t.Errorf("Events %v", reasons)
	}
}

// A restart that does not belong to the record on the workload (stale, or not reloader's)
// is ended without evicting anything.
func TestStepEndsARestartOfAnotherRecord(t *testing.T) {
	since := now.Add(-time.Minute)
	sts := statefulSet(1, since)
	sts.Annotations[reload.RecordAnnotation] = reload.Record{"configmap/conf": "h3"}.Encode()
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(sts, pod("db-0", since.Add(-time.Hour), true)).Build()
	e := restarter(c, &writertest.Reporter{})
	ctx := context.Background()
	read := &appsv1.StatefulSet{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(sts), read); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Step(ctx, read, Evict, reconcile.Result{}, metrics.OutcomeUnchanged); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(sts), read); err != nil {
		t.Fatal(err)
	}
	if _, ok := read.Annotations[reload.EvictingAnnotation]; ok {
		t.Error("restart of another record not ended")
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "a", Name: "db-0"}, &corev1.Pod{}); err != nil {
		t.Errorf("pod evicted by a restart of another record: %v", err)
	}
}

// A reload under the evict strategy leaves the template and marks the restart for the new
// record; explain reads the same state the step acts on.
func TestMarkAndExplain(t *testing.T) {
	rep := &writertest.Reporter{}
	since := now.Add(-time.Minute)
	sts := statefulSet(1, since)
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(pod("db-0", since.Add(-time.Hour), true)).Build()
	e := restarter(c, rep)
	next := reload.Record{"configmap/conf": "h4"}
	updated := sts.DeepCopy()
	e.Mark(updated, Rollout, []reload.Change{{ID: source.ID{Kind: source.ConfigMap, Name: "conf"}}}, next)
	if updated.Annotations[reload.EvictingAnnotation] != sts.Annotations[reload.EvictingAnnotation] {
		t.Error("a rollout marked an evict restart")
	}
	e.Mark(updated, Evict, nil, next)
	if updated.Annotations[reload.EvictingAnnotation] != sts.Annotations[reload.EvictingAnnotation] {
		t.Error("a write without reload marked an evict restart")
	}
	e.Mark(updated, Evict, []reload.Change{{ID: source.ID{Kind: source.ConfigMap, Name: "conf"}}}, next)
	if got, want := updated.Annotations[reload.EvictingAnnotation], reload.StartEvicting(now, next).Encode(); got != want {
		t.Errorf("evicting %s; want %s", got, want)
	}
	x := e.Explain(context.Background(), sts, false)
	if x.Invalid != nil || x.Restart == "" || x.Eviction == "" {
		t.Errorf("explain %+v", x)
	}
	e.Enabled = false
	if x := e.Explain(context.Background(), sts, true); x.Restart != "evict, which is not enabled (--enable-evict-strategy): the reload waits until it is" {
		t.Errorf("explain, not enabled: %+v", x)
	}
}
