package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/testutil/objects"
)

// In degraded mode (upstream's RBAC), a namespace of 300 Deployments, each on its own
// ConfigMap: 100 ConfigMaps change while reloader is still taking its first records, 50 of
// them again at once, and 20 Deployments created after start-up (never listed at start, so
// first seen through the live lists a change makes) have their ConfigMaps changed. Every
// Deployment ends on its ConfigMap's last content; none rolls twice to the same content,
// nor more often than its ConfigMap changed; the 180 others never roll.
func TestDegradedModeAtScale(t *testing.T) {
	t.Parallel() // its own control plane and reloader
	const total, changed, twice, late = 300, 100, 50, 20
	bin := buildReloader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cluster, cl := startCluster(t, ctx, testenv.Options{})
	out := outputLoggedOnFailure(t)
	const own, ns = "reloader", "busy"
	testutil.Must(t, cluster.EnsureNamespace(ctx, cl, ns))
	kubeconfig := upstreamUser(t, ctx, cluster, cl, own)
	b := newBurst(t, ctx, cl, ns, total)
	templates := watchTemplates(t, ctx, cluster.Config, ns)

	_, addr := startReady(t, ctx, bin, kubeconfig, own, "reloader | ", out, "--coalesce-window=100ms")
	if v := gauge("http://"+addr+"/metrics", "reloader_degraded", `kind="Deployment"`); v != 1 {
		t.Fatalf("reloader_degraded{kind=\"Deployment\"} = %d; want 1", v)
	}
	started := time.Now()
	// At once, while the first records are paced (--first-sight-rate 20/s: 15 s for 300).
	first := &burst{cms: b.cms[:changed]}
	first.round(t, ctx, cl, 1)
	again := &burst{cms: b.cms[:twice]}
	again.round(t, ctx, cl, 2)

	// Created after start-up: no watch, so reloader first sees them when their ConfigMap changes.
	lateOnes := &burst{}
	const added = `reloader_events_received_total{event_type="add",resource_type="configmaps"}`
	before, err := testutil.ScrapeMetrics("http://" + addr + "/metrics")
	testutil.Must(t, err)
	for i := range late {
		name := fmt.Sprintf("late-%d", i)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"round": "0"}}
		testutil.Must(t, cl.Create(ctx, cm))
		testutil.Must(t, cl.Create(ctx, objects.AutoDeployment(ns, name, name)))
		lateOnes.cms = append(lateOnes.cms, cm)
	}
	// The late ones' creation is not a change their ConfigMaps make: reloader has heard them
	// created before they change.
	testutil.Eventually(t, "the late ConfigMaps' creation heard", func() error {
		now, err := testutil.ScrapeMetrics("http://" + addr + "/metrics")
		if err != nil {
			return err
		}
		if now[added] < before[added]+late {
			return fmt.Errorf("%s %g, want %g", added, now[added], before[added]+late)
		}
		return nil
	})
	lateOnes.round(t, ctx, cl, 1)

	want := func(i int) int {
		switch {
		case i < twice:
			return 2
		case i < changed:
			return 1
		}
		return 0
	}
	behind := func() []string {
		var names []string
		for i, cm := range b.cms {
			if r := want(i); r > 0 && templates.last(cm.Name, b.env(cm)) != b.hashOf(cm, r) {
				names = append(names, cm.Name)
			}
		}
		for _, cm := range lateOnes.cms {
			if templates.last(cm.Name, lateOnes.env(cm)) != lateOnes.hashOf(cm, 1) {
				names = append(names, cm.Name)
			}
		}
		return names
	}
	testutil.EventuallyWithin(t, 90*time.Second, "every Deployment on its ConfigMap's last content", func() error {
		if names := behind(); len(names) > 0 {
			d := objects.AutoDeployment(ns, "late-0", "late-0")
			_ = cl.Get(ctx, client.ObjectKeyFromObject(d), d)
			return fmt.Errorf("not on their ConfigMap's last content: %v; late-0: %v %v", names, d.Annotations, d.Spec.Template.Spec.Containers[0].Env)
		}
		return nil
	})
	took := time.Since(started)
	settled(t, "reloader", addr) // a duplicate, if any, would move its counters
	rolls := 0
	for i, cm := range b.cms {
		values := templates.values(cm.Name, b.env(cm))
		rolls += len(values)
		switch r := want(i); r {
		case 0:
			if len(values) > 0 {
				t.Errorf("%s: unchanged ConfigMap, yet rolled: %v", cm.Name, values)
			}
		default:
			rounds := []int{1, 2}[:r]
			b.checkRollouts(t, cm, values, rounds)
		}
	}
	for _, cm := range lateOnes.cms {
		values := templates.values(cm.Name, lateOnes.env(cm))
		rolls += len(values)
		lateOnes.checkRollouts(t, cm, values, []int{1})
	}
	// Lists per change: the cost the warning names.
	t.Logf("%d rollouts for %d ConfigMap changes (%d coalesced), all on the last content within %v; %d template changes seen",
		rolls, changed+twice+late, changed+twice+late-rolls, took.Round(100*time.Millisecond), rolls)
	if n := strings.Count(out.String(), "Reconciler error"); n > 0 {
		t.Errorf("%d reconciler errors", n)
	}
}
