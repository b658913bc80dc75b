package e2e

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/testutil/objects"
)

// Health-gated waves on a real control plane: one ConfigMap used by 40 Deployments, with
// --waves-min-workloads=10. Every node cordoned, a change rolls the canary only; its rollout
// stalls (progress deadline 5 s), and the other 39 are held: WavesHalted, explain and the
// metric say why. Nodes back and the content changed again (the fix): all 40 roll once each,
// in waves of 1, 2, 4, 8, 16 and 9. Then a third content, and reloader SIGKILLed mid-wave and
// started again: the wave goes on, and no Deployment rolls twice.
func TestWavesHaltAndFix(t *testing.T) {
	t.Parallel() // its own control plane and reloader
	bin := buildReloader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	cluster, cl := startCluster(t, ctx, testenv.Options{Rollouts: true, Nodes: 1})
	const own, ns, n = "reloader-system", "waves", 40
	for _, name := range []string{own, ns} {
		testutil.Must(t, cluster.EnsureNamespace(ctx, cl, name))
	}
	out := outputLoggedOnFailure(t)
	proc, addr := startReady(t, ctx, bin, cluster.Kubeconfig, own, "reloader | ", out, "--waves-min-workloads=10")
	templates := watchTemplates(t, ctx, cluster.Config, ns)

	cm := &corev1.ConfigMap{Data: map[string]string{"k": "v1"}}
	cm.Namespace, cm.Name = ns, "shared"
	testutil.Must(t, cl.Create(ctx, cm))
	var names []string
	for i := range n {
		d := objects.AutoDeployment(ns, fmt.Sprintf("web-%02d", i), "shared")
		d.Spec.ProgressDeadlineSeconds = ptr.To[int32](5)
		d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}
		testutil.Must(t, cl.Create(ctx, d))
		names = append(names, d.Name)
	}
	for _, name := range names {
		d := &appsv1.Deployment{}
		d.Namespace, d.Name = ns, name
		waitRecorded(t, ctx, cl, d)
	}
	waitAvailable(t, ctx, cl, ns, n)
	const env = "STAKATER_SHARED_CONFIGMAP"
	change := func(v string) {
		t.Helper()
		testutil.Must(t, cl.Get(ctx, client.ObjectKeyFromObject(cm), cm))
		cm.Data["k"] = v
		testutil.Must(t, cl.Update(ctx, cm))
	}
	rolls := func() []int {
		out := make([]int, n)
		for i, name := range names {
			out[i] = len(templates.values(name, env))
		}
		return out
	}

	// Part 1: the canary stalls; the other 39 are held, halted.
	cordon(t, ctx, cl, true)
	change("v2")
	testutil.Eventually(t, "the canary web-00 rolled", testutil.Cond(func() (bool, error) { return rolls()[0] == 1, nil }))
	ev := waitForEvent(t, ctx, cl, ns, "web-39", "WavesHalted")
	t.Logf("Event on web-39: %s (%s): %s", ev.Reason, ev.Type, ev.Note)
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Note, "deployment/web-00 stalled") || !strings.Contains(ev.Note, "ProgressDeadlineExceeded") {
		t.Errorf("WavesHalted Event %s %q: want a Warning naming the stalled canary and why", ev.Type, ev.Note)
	}
	testutil.Eventually(t, "every other Deployment halted", testutil.Cond(func() (bool, error) {
		for _, name := range names[1:] {
			if ok, err := hasEvent(ctx, cl, ns, name, "WavesHalted"); !ok || err != nil {
				return false, err
			}
		}
		return true, nil
	}))
	if got := rolls(); slices.Max(got[1:]) != 0 {
		t.Errorf("while the canary stalled, the others rolled: %v", got)
	}
	explained, err := exec.CommandContext(ctx, bin, "explain", "deployment/web-20", "-n", ns, "--kubeconfig", cluster.Kubeconfig,
		"--reloader-namespace", own, "--waves-min-workloads=10").CombinedOutput()
	t.Logf("reloader explain deployment/web-20 while halted:\n%s", explained)
	if err != nil || !strings.Contains(string(explained), "waves-halted") || !strings.Contains(string(explained), "deployment/web-00 stalled") {
		t.Errorf("explain does not show the halt (%v)", err)
	}
	if got := gauge("http://"+addr+"/metrics", "reloader_waves_halted", `kind="configmap",name="shared",namespace="waves"`); got != 1 {
		t.Errorf("reloader_waves_halted for configmap/shared = %d while halted, want 1", got)
	}
	t.Logf("halted: web-00 rolled once and stalled; rolls of web-01..web-39: %d", sum(rolls()[1:]))

	// Part 2: the fix rolls all 40 once each, in waves.
	cordon(t, ctx, cl, false)
	before := rolls()
	start := time.Now()
	change("v3")
	rolledAt := clockRolls(ctx, before, rolls)
	waitAllRolled(t, rolledAt)
	logWaves(t, names, rolledAt(), start)
	settled(t, "reloader", "http://"+addr+"/metrics")
	after := rolls()
	t.Logf("rolls per Deployment on the fix: %s", histogram(before, after))
	for i, name := range names {
		if after[i]-before[i] != 1 {
			t.Errorf("%s rolled %d times on the fix, want 1", name, after[i]-before[i])
		}
	}
	if v := templates.last(names[0], env); slices.ContainsFunc(names, func(name string) bool { return templates.last(name, env) != v }) {
		t.Errorf("not every Deployment ends on the fix's content")
	}
	if got := gauge("http://"+addr+"/metrics", "reloader_waves_halted", `kind="configmap",name="shared",namespace="waves"`); got > 0 {
		t.Errorf("reloader_waves_halted = %d after the fix, want the series gone", got)
	}

	// Part 3: SIGKILL mid-wave; the wave goes on after a restart; nothing rolls twice.
	waitAvailable(t, ctx, cl, ns, n)
	before = rolls()
	start = time.Now()
	change("v4")
	rolledAt = clockRolls(ctx, before, rolls)
	testutil.Eventually(t, "the first waves rolled", testutil.Cond(func() (bool, error) {
		moved := 0
		for i, c := range rolls() {
			moved += c - before[i]
		}
		return moved >= 4, nil
	}))
	proc.Kill()
	killed := rolls()
	moved := 0
	for i := range killed {
		moved += killed[i] - before[i]
	}
	t.Logf("SIGKILL %.1fs after the change, %d of %d Deployments rolled on the new content", time.Since(start).Seconds(), moved, n)
	restart := time.Now()
	if moved >= n {
		t.Errorf("all %d rolled before the kill: not mid-wave", n)
	}
	_, addr = startReady(t, ctx, bin, cluster.Kubeconfig, own, "reloader-2 | ", out, "--waves-min-workloads=10")
	t.Logf("reloader started again %.1fs after the change (%.1fs to /ready)", time.Since(start).Seconds(), time.Since(restart).Seconds())
	waitAllRolled(t, rolledAt)
	logWaves(t, names, rolledAt(), start)
	settled(t, "reloader-2", "http://"+addr+"/metrics")
	after = rolls()
	t.Logf("rolls per Deployment on the content of the killed wave: %s", histogram(before, after))
	for i, name := range names {
		if after[i]-before[i] != 1 {
			t.Errorf("%s rolled %d times on the content of the killed wave, want 1", name, after[i]-before[i])
		}
	}
}

// cordon marks every node unschedulable (on) or schedulable again.
func cordon(t *testing.T, ctx context.Context, cl client.Client, on bool) {
	t.Helper()
	var nodes corev1.NodeList
	testutil.Must(t, cl.List(ctx, &nodes))
	for i := range nodes.Items {
		node := &nodes.Items[i]
		patch := client.MergeFrom(node.DeepCopy())
		node.Spec.Unschedulable = on
		testutil.Must(t, cl.Patch(ctx, node, patch))
	}
}

// waitAvailable waits for the n Deployments of ns to have completed their rollouts.
func waitAvailable(t *testing.T, ctx context.Context, cl client.Client, ns string, n int) {
	t.Helper()
	// The cluster's controllers, not reloader, complete the rollouts: on a loaded machine
	// (the test jobs run side by side) 40 of them took over 3 minutes once.
	testutil.EventuallyWithin(t, 6*time.Minute, "every Deployment available", func() error {
		var list appsv1.DeploymentList
		if err := cl.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		var pending []string
		for _, d := range list.Items {
			s := d.Status
			if !(s.ObservedGeneration == d.Generation && s.UpdatedReplicas == *d.Spec.Replicas && s.AvailableReplicas == *d.Spec.Replicas && s.Replicas == *d.Spec.Replicas) {
				pending = append(pending, fmt.Sprintf("%s (generation %d observed %d, replicas %d updated %d available %d)",
					d.Name, d.Generation, s.ObservedGeneration, s.Replicas, s.UpdatedReplicas, s.AvailableReplicas))
			}
		}
		if len(list.Items) != n || len(pending) > 0 {
			return fmt.Errorf("%d Deployments, want %d; not done: %s", len(list.Items), n, strings.Join(pending, ", "))
		}
		return nil
	})
}

// waitAllRolled waits for every Deployment to be noted rolled by clock (clockRolls).
func waitAllRolled(t *testing.T, clock func() []time.Time) {
	t.Helper()
	testutil.EventuallyWithin(t, 5*time.Minute, "every Deployment rolled", testutil.Cond(func() (bool, error) {
		return !slices.ContainsFunc(clock(), time.Time.IsZero), nil
	}))
}

// clockRolls notes, from now on, when each Deployment is first seen rolled past before
// (every 100 ms, until ctx ends); the returned func reads the times noted so far.
func clockRolls(ctx context.Context, before []int, rolls func() []int) func() []time.Time {
	var mu sync.Mutex
	at := make([]time.Time, len(before))
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			now, left := rolls(), 0
			mu.Lock()
			for i := range at {
				if at[i].IsZero() && now[i] > before[i] {
					at[i] = time.Now()
				}
				if at[i].IsZero() {
					left++
				}
			}
			mu.Unlock()
			if left == 0 {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(at)
	}
}

// logWaves prints, per wave (1, 2, 4, ... in name order), when its Deployments rolled.
func logWaves(t *testing.T, names []string, at []time.Time, start time.Time) {
	t.Helper()
	first, size := 0, 1
	for wave := 1; first < len(names); wave++ {
		last := min(first+size, len(names))
		lo, hi := at[first], at[first]
		for _, ts := range at[first:last] {
			lo, hi = testutil.Earlier(lo, ts), testutil.Later(hi, ts)
		}
		t.Logf("wave %d (%s..%s, %d): rolled %.1fs..%.1fs after the change", wave, names[first], names[last-1], last-first,
			lo.Sub(start).Seconds(), hi.Sub(start).Seconds())
		first, size = last, size*2
		if wave == 1 {
			size = 2
		}
	}
}

// histogram says how many Deployments rolled how many times between before and after.
func histogram(before, after []int) string {
	count := map[int]int{}
	for i := range after {
		count[after[i]-before[i]]++
	}
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(count)) {
		parts = append(parts, fmt.Sprintf("%d Deployments rolled %d time(s)", count[n], n))
	}
	return strings.Join(parts, ", ")
}

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}
