package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testenv/proc"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/testutil/objects"
)

// With the real Deployment controller: a reload whose new pods come up ends in
// RolloutComplete; one whose new pods can't be scheduled (every node cordoned) ends in
// RolloutStalled with the controller's ProgressDeadlineExceeded.
func TestRolloutOutcomesWithRealControllers(t *testing.T) {
	t.Parallel() // its own control plane and reloader
	bin := buildReloader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, cl := startCluster(t, ctx, testenv.Options{Rollouts: true, Nodes: 1})
	out := outputLoggedOnFailure(t)
	stop, err := proc.Start(bin, []string{"--metrics-addr=0"}, cluster.Kubeconfig, "reloader | ", out)
	testutil.Must(t, err)
	defer stop()

	const ns = "e2e"
	testutil.Must(t, cluster.EnsureNamespace(ctx, cl, ns))
	cm := &corev1.ConfigMap{Data: map[string]string{"k": "v1"}}
	cm.Namespace, cm.Name = ns, "cfg"
	d := objects.AutoDeployment(ns, "web", "cfg")
	d.Spec.Replicas = ptr.To[int32](2)
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](5)
	d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}
	for _, o := range []client.Object{cm, d} {
		testutil.Must(t, cl.Create(ctx, o))
	}
	waitRecorded(t, ctx, cl, d)
	change := func(v string) {
		t.Helper()
		cm.Data["k"] = v
		testutil.Must(t, cl.Update(ctx, cm))
	}

	change("v2")
	complete := waitForEvent(t, ctx, cl, ns, "web", "RolloutComplete")
	if complete.Type != corev1.EventTypeNormal || !strings.Contains(complete.Note, "complete: 2 of 2 replicas updated, 2 ready, 2 available") {
		t.Errorf("RolloutComplete: %s %q", complete.Type, complete.Note)
	}

	var nodes corev1.NodeList
	testutil.Must(t, cl.List(ctx, &nodes))
	for i := range nodes.Items {
		n := &nodes.Items[i]
		patch := client.MergeFrom(n.DeepCopy())
		n.Spec.Unschedulable = true
		testutil.Must(t, cl.Patch(ctx, n, patch))
	}
	change("v3")
	stalled := waitForEvent(t, ctx, cl, ns, "web", "RolloutStalled")
	if stalled.Type != corev1.EventTypeWarning || !strings.Contains(stalled.Note, "1 of 2 replicas updated") ||
		!strings.Contains(stalled.Note, "ProgressDeadlineExceeded: ReplicaSet") {
		t.Errorf("RolloutStalled: %s %q", stalled.Type, stalled.Note)
	}
}

// waitForEvent waits for the Event with reason about name, and returns it.
func waitForEvent(t *testing.T, ctx context.Context, cl client.Client, ns, name, reason string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	testutil.Eventually(t, reason+" Event", testutil.Cond(func() (bool, error) {
		var events eventsv1.EventList
		if err := cl.List(ctx, &events, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Regarding.Name == name && e.Reason == reason {
				found = e
				return true, nil
			}
		}
		return false, nil
	}))
	return found
}
