package e2e

import (
	"context"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testenv/proc"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/testutil/objects"
)

// A source changed right after its workload was created (as upstream's e2e suite does, and a
// CI pipeline applying a Deployment then its ConfigMap): the two reach reloader on two watches
// in no set order, and the workload often reaches the cache after the change was heard. Each
// such workload still rolls, once, to the new content; a workload created after the change
// (the second half) does not roll: it starts with that content (at most 2 of 20, rarely, roll
// once at creation: left open, see docs/guarantees.md).
func TestChangeRightAfterCreationRolls(t *testing.T) {
	bin := buildReloader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cluster, cl := startCluster(t, ctx, testenv.Options{})
	out := outputLoggedOnFailure(t)
	const ns, pairs, maxExtra = "creation-race", 40, 2
	if err := cluster.EnsureNamespace(ctx, cl, ns); err != nil {
		t.Fatal(err)
	}
	addr, err := proc.FreeAddr()
	testutil.Must(t, err)
	p, err := proc.Run(proc.Spec{Bin: bin, Kubeconfig: cluster.Kubeconfig, Prefix: "reloader | ", Out: out,
		Args: []string{"--metrics-addr=" + addr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	var b burst // its content hashes and env var names
	// The ready ConfigMap tells that reloader's caches are up: its workload gets a record.
	ready := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ready"}, Data: map[string]string{"round": "0"}}
	for _, o := range []client.Object{ready, objects.AutoDeployment(ns, "ready", "ready")} {
		if err := cl.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitRecorded(t, ctx, cl, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ready"}})
	templates := watchTemplates(t, ctx, cluster.Config, ns)

	var all []*corev1.ConfigMap
	for i := range pairs {
		name := "app-" + strconv.Itoa(i)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"round": "0"}}
		if err := cl.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		all = append(all, cm)
		d := objects.AutoDeployment(ns, name, name)
		steps := []func() error{
			func() error { return cl.Create(ctx, d) },
			func() error { cm.Data["round"] = "1"; return cl.Update(ctx, cm) },
		}
		if i%2 == 1 { // changed, then created
			steps[0], steps[1] = steps[1], steps[0]
		}
		for _, step := range steps {
			if err := step(); err != nil {
				t.Fatal(err)
			}
		}
	}
	var behind []string
	defer func() {
		if len(behind) > 0 {
			t.Logf("not rolled: %v", behind)
		}
	}()
	testutil.Eventually(t, "every Deployment created before its change on the new content", testutil.Cond(func() (bool, error) {
		behind = behind[:0]
		for i, cm := range all {
			if i%2 == 0 && templates.last(cm.Name, b.env(cm)) != b.hashOf(cm, 1) {
				behind = append(behind, cm.Name)
			}
		}
		return len(behind) == 0, nil
	}))
	// A marker change after everything: once it has rolled its workload, reloader has handled
	// every event before it (one work queue per kind, in order of the events heard).
	ready.Data["round"] = "1"
	if err := cl.Update(ctx, ready); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the marker rolled", testutil.Cond(func() (bool, error) {
		return templates.last("ready", b.env(ready)) == b.hashOf(ready, 1), nil
	}))
	settled(t, "reloader", addr) // room for a late duplicate
	rolled, extra := 0, 0
	for i, cm := range all {
		values := templates.values(cm.Name, b.env(cm))
		switch {
		case i%2 == 0 && len(values) == 1:
			rolled++
		case i%2 == 0:
			t.Errorf("%s, created before its change: rollouts %v, want one to %s", cm.Name, values, b.hashOf(cm, 1))
		case len(values) > 0:
			extra++
			t.Logf("%s, created after its change: rolled %v", cm.Name, values)
		}
	}
	// Left open (docs/guarantees.md): rarely, one created just after its change rolls once at
	// its creation. More than that is a regression.
	if extra > maxExtra {
		t.Errorf("%d workloads created after their change rolled, want at most %d", extra, maxExtra)
	}
	t.Logf("%d of %d workloads changed right after creation rolled once; %d created after their change rolled", rolled, pairs/2, extra)
}
