package controller_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/reloader-operator/reloader/internal/controller"
	follow "github.com/reloader-operator/reloader/internal/controller/rollout"
	"github.com/reloader-operator/reloader/internal/extapi"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// envtest runs no kube-controller-manager: these tests write the workloads' status
// themselves, as the Deployment and StatefulSet controllers would.

// eventsAbout returns the Events with reason about the workload name.
func eventsAbout(t *testing.T, ns, name, reason string) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	testutil.Must(t, k8s.List(context.Background(), &list, client.InNamespace(ns)))
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// oneEvent waits for the Event with reason about name and checks that it is the only one,
// emitted once, when reloader has stopped following the rollout (the Event is its last word
// on it).
func oneEvent(t *testing.T, ns, name, reason string) eventsv1.Event {
	t.Helper()
	eventuallyEvent(t, ns, name, reason)
	testutil.Eventually(t, "no rollout followed", func() error {
		if n := gauge(t, "reloader_rollouts_following"); n != 0 {
			return fmt.Errorf("following %v rollouts", n)
		}
		return nil
	})
	evs := eventsAbout(t, ns, name, reason)
	if len(evs) != 1 || evs[0].Series != nil {
		t.Fatalf("%d %s Events (%+v), want one, emitted once", len(evs), reason, evs)
	}
	return evs[0]
}

// reloadedGeneration changes the ConfigMap and waits for the reload: the generation of obj
// the reload wrote.
func reloadedGeneration(t *testing.T, cm *corev1.ConfigMap, obj client.Object) int64 {
	t.Helper()
	before := get(t, obj).GetGeneration()
	changeConfig(t, cm, "v2")
	testutil.Eventually(t, "reloaded", func() error {
		if g := get(t, obj).GetGeneration(); g == before {
			return fmt.Errorf("generation still %d", g)
		}
		return nil
	})
	return obj.GetGeneration()
}

// setStatus writes the status of obj as its controller would.
func setStatus[T client.Object](t *testing.T, obj T, change func(T)) {
	t.Helper()
	testutil.Must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	change(obj)
	testutil.Must(t, k8s.Status().Update(context.Background(), obj))
}

func rolloutsCounted(t *testing.T, kind, outcome string) float64 {
	return counter(t, "reloader_rollouts_total", map[string]string{"kind": kind, "outcome": outcome})
}

func gauge(t *testing.T, name string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	testutil.Must(t, err)
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return 0
}

func TestReloadedDeploymentRolloutComplete(t *testing.T) {
	before := rolloutsCounted(t, "Deployment", follow.RolloutComplete)
	ns, cm, d, _ := autoDeployment(t)
	gen := reloadedGeneration(t, cm, d)
	testutil.Eventually(t, "following", func() error {
		if n := gauge(t, "reloader_rollouts_following"); n != 1 {
			return fmt.Errorf("following %v rollouts", n)
		}
		return nil
	})

	// New pods up, the old one not yet gone: not complete.
	setStatus(t, d, func(d *appsv1.Deployment) {
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: gen, Replicas: 2, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	})
	followed(t, d)
	if evs := eventsAbout(t, ns, "web", follow.ReasonRolloutComplete); len(evs) != 0 {
		t.Fatalf("complete while an old pod runs: %s", evs[0].Note)
	}

	setStatus(t, d, func(d *appsv1.Deployment) { d.Status.Replicas = 1 })
	ev := oneEvent(t, ns, "web", follow.ReasonRolloutComplete)
	if ev.Type != corev1.EventTypeNormal || !strings.Contains(ev.Note, "Rollout of Deployment web after change of ConfigMap cfg complete: 1 of 1 replicas updated, 1 ready, 1 available") {
		t.Errorf("event %s %q", ev.Type, ev.Note)
	}
	testutil.Eventually(t, "counted", func() error {
		if n := rolloutsCounted(t, "Deployment", follow.RolloutComplete) - before; n != 1 {
			return fmt.Errorf("reloader_rollouts_total complete +%v", n)
		}
		return nil
	})
	if n := gauge(t, "reloader_rollouts_following"); n != 0 {
		t.Errorf("still following %v rollouts", n)
	}

	// Followed no more: later status changes say nothing.
	setStatus(t, d, func(d *appsv1.Deployment) { d.Status.Replicas, d.Status.UpdatedReplicas = 2, 2 })
	setStatus(t, d, func(d *appsv1.Deployment) { d.Status.Replicas, d.Status.UpdatedReplicas = 1, 1 })
	// Followed no more, web's status reaches no queue (the follower's predicate), so there is
	// no reconcile to wait for: its cache holding the last status write, and the reload
	// controller's handling of web since, are the sign that it was heard.
	handled(t, d)
	if evs := eventsAbout(t, ns, "web", follow.ReasonRolloutComplete); len(evs) != 1 || evs[0].Series != nil {
		t.Errorf("%d RolloutComplete Events after the rollout ended", len(evs))
	}
}

func TestReloadedDeploymentRolloutStalled(t *testing.T) {
	before := rolloutsCounted(t, "Deployment", follow.RolloutStalled)
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	d := deployment(ns, "web", map[string]string{auto: "true"}, podSpec("cfg"))
	d.Spec.Replicas = ptr.To[int32](3)
	create(t, cm, d)
	startReloader(t, ns)
	recorded(t, d)
	gen := reloadedGeneration(t, cm, d)

	setStatus(t, d, func(d *appsv1.Deployment) {
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: gen, Replicas: 4, UpdatedReplicas: 1, ReadyReplicas: 3, AvailableReplicas: 3,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
				Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "web-5d4f" has timed out progressing.`}}}
	})
	ev := oneEvent(t, ns, "web", follow.ReasonRolloutStalled)
	want := `Rollout of Deployment web after change of ConfigMap cfg stalled: 1 of 3 replicas updated, 3 ready, 3 available, 3 old pending termination; ProgressDeadlineExceeded: ReplicaSet "web-5d4f" has timed out progressing.`
	if ev.Type != corev1.EventTypeWarning || ev.Note != want {
		t.Errorf("event %s %q\nwant Warning %q", ev.Type, ev.Note, want)
	}
	if evs := eventsAbout(t, ns, "web", follow.ReasonRolloutComplete); len(evs) != 0 {
		t.Errorf("also complete: %s", evs[0].Note)
	}
	testutil.Eventually(t, "counted", func() error {
		if n := rolloutsCounted(t, "Deployment", follow.RolloutStalled) - before; n != 1 {
			return fmt.Errorf("reloader_rollouts_total stalled +%v", n)
		}
		return nil
	})
}

func TestStatefulSetRolloutPastTheDeadlineStalls(t *testing.T) {
	before := rolloutsCounted(t, "StatefulSet", follow.RolloutStalled)
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	sts := statefulSet(ns, "db", map[string]string{auto: "true"}, podSpec("cfg"))
	sts.Spec.Replicas = ptr.To[int32](2)
	create(t, cm, sts)
	startReloader(t, ns, func(o *options.Options) { o.RolloutDeadline = 2 * time.Second })
	recorded(t, sts)
	gen := reloadedGeneration(t, cm, sts)
	reloaded := time.Now()

	setStatus(t, sts, func(s *appsv1.StatefulSet) {
		s.Status = appsv1.StatefulSetStatus{ObservedGeneration: gen, Replicas: 2, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
			CurrentRevision: "db-1", UpdateRevision: "db-2"}
	})
	ev := oneEvent(t, ns, "db", follow.ReasonRolloutStalled)
	if took := time.Since(reloaded); took < 2*time.Second {
		t.Errorf("stalled %v after the reload, before --rollout-deadline", took)
	}
	if !strings.Contains(ev.Note, "Rollout of StatefulSet db after change of ConfigMap cfg stalled: 1 of 2 replicas updated, 1 ready, 1 available; no progress in 2s (--rollout-deadline)") {
		t.Errorf("event %q", ev.Note)
	}
	testutil.Eventually(t, "counted", func() error {
		if n := rolloutsCounted(t, "StatefulSet", follow.RolloutStalled) - before; n != 1 {
			return fmt.Errorf("reloader_rollouts_total stalled +%v", n)
		}
		return nil
	})
}

func TestStatefulSetRolloutCompletes(t *testing.T) {
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	sts := statefulSet(ns, "db", map[string]string{auto: "true"}, podSpec("cfg"))
	create(t, cm, sts)
	startReloader(t, ns)
	recorded(t, sts)
	gen := reloadedGeneration(t, cm, sts)
	setStatus(t, sts, func(s *appsv1.StatefulSet) {
		s.Status = appsv1.StatefulSetStatus{ObservedGeneration: gen, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
			CurrentRevision: "db-2", UpdateRevision: "db-2"}
	})
	oneEvent(t, ns, "db", follow.ReasonRolloutComplete)
}

// Status churn of workloads that were not reloaded reaches neither the reload controller
// nor the rollout follower.
func TestStatusChurnOfWorkloadsNotReloadedCostsNoReconcile(t *testing.T) {
	ns, _, d, _ := autoDeployment(t)
	reconciles := func() (reload, follow float64) {
		families, err := crmetrics.Registry.Gather()
		testutil.Must(t, err)
		for _, f := range families {
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				switch {
				case f.GetName() == "reloader_workload_reconcile_total" && labels["kind"] == "Deployment":
					reload += m.GetCounter().GetValue()
				case f.GetName() == "controller_runtime_reconcile_total" && labels["controller"] == "deployment-rollout":
					follow += m.GetCounter().GetValue()
				}
			}
		}
		return reload, follow
	}
	handled(t, d) // the reconciles of the start, and of the poke, are over
	reloadBefore, followBefore := reconciles()
	for i := range 5 {
		setStatus(t, d, func(d *appsv1.Deployment) {
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: int32(i + 1), UpdatedReplicas: int32(i + 1)}
		})
	}
	reloaders.in(d.Namespace).holds(t, d)
	time.Sleep(quietSpan) // the subject: a span in which status churn wakes nothing
	reloadAfter, followAfter := reconciles()
	if reloadAfter != reloadBefore || followAfter != followBefore {
		t.Errorf("status churn caused %v reload and %v follower reconciles, want none", reloadAfter-reloadBefore, followAfter-followBefore)
	}
	if evs := eventsAbout(t, ns, "web", follow.ReasonRolloutComplete); len(evs) != 0 {
		t.Errorf("a rollout reported without a reload: %s", evs[0].Note)
	}
}

// A workload deleted while its rollout is followed is forgotten.
func TestDeletedWorkloadIsNoLongerFollowed(t *testing.T) {
	_, cm, d, _ := autoDeployment(t)
	reloadedGeneration(t, cm, d)
	testutil.Eventually(t, "following", func() error {
		if n := gauge(t, "reloader_rollouts_following"); n != 1 {
			return fmt.Errorf("following %v rollouts", n)
		}
		return nil
	})
	testutil.Must(t, k8s.Delete(context.Background(), d))
	testutil.Eventually(t, "forgotten", func() error {
		if n := gauge(t, "reloader_rollouts_following"); n != 0 {
			return fmt.Errorf("following %v rollouts", n)
		}
		return nil
	})
}

// An Argo Rollout's status, as the API server stores it (observedGeneration is a string),
// reads as its controller meant it.
func TestArgoRolloutRolloutComplete(t *testing.T) {
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	ro := rollout(ns, "canary", map[string]string{auto: "true"}, podSpec("cfg"))
	ro.Spec.Replicas = ptr.To[int32](2)
	create(t, cm, ro)
	startReloader(t, ns, func(o *options.Options) { o.IsArgoRollouts = true })
	recorded(t, ro)
	gen := reloadedGeneration(t, cm, ro)

	status := extapi.RolloutStatus{ObservedGeneration: strconv.FormatInt(gen, 10), Replicas: 2, UpdatedReplicas: 2,
		ReadyReplicas: 2, AvailableReplicas: 2, Phase: "Progressing", CurrentPodHash: "new", StableRS: "old"}
	setStatus(t, ro, func(r *extapi.Rollout) { r.Status = status })
	followed(t, ro)
	if evs := eventsAbout(t, ns, "canary", follow.ReasonRolloutComplete); len(evs) != 0 {
		t.Fatalf("complete before the new pods were promoted to stable: %s", evs[0].Note)
	}
	setStatus(t, ro, func(r *extapi.Rollout) { r.Status.StableRS, r.Status.Phase = "new", "Healthy" })
	ev := oneEvent(t, ns, "canary", follow.ReasonRolloutComplete)
	if !strings.Contains(ev.Note, "Rollout of Rollout canary after change of ConfigMap cfg complete: 2 of 2 replicas updated") {
		t.Errorf("event %q", ev.Note)
	}
}

// A reload of many sources with long names still gets its Events: the note is clipped to
// what the API server accepts (1024 bytes).
func TestOutcomeEventOfAReloadOfManySources(t *testing.T) {
	ns := newNamespace(t)
	var names []string
	for i := range 8 {
		name := fmt.Sprintf("%s-%d", strings.Repeat("c", 240), i)
		names = append(names, name)
		create(t, configMap(ns, name, map[string]string{"k": "v1"}))
	}
	d := deployment(ns, "web", map[string]string{auto: "true"}, podSpec(names...))
	create(t, d)
	startReloader(t, ns, func(o *options.Options) { o.CoalesceWindow = time.Second })
	recorded(t, d)
	before := get(t, d).Generation
	for _, name := range names {
		changeConfig(t, configMap(ns, name, nil), "v2")
	}
	testutil.Eventually(t, "reloaded", func() error {
		if get(t, d).Generation == before {
			return fmt.Errorf("not reloaded")
		}
		return nil
	})
	gen := d.Generation
	setStatus(t, d, func(d *appsv1.Deployment) {
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: gen, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	})
	ev := oneEvent(t, ns, "web", follow.ReasonRolloutComplete)
	if len(ev.Note) > 1024 || !strings.HasPrefix(ev.Note, "Rollout of Deployment web after change of ConfigMap ccc") {
		t.Errorf("note of %d bytes: %.80q", len(ev.Note), ev.Note)
	}
	// So does the reload itself.
	oneEvent(t, ns, "web", controller.ReasonReloaded)
}
