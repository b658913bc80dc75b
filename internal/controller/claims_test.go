package controller_test

import (
	"encoding/json"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/testutil/follower"
)

// README: "Work per change grows with the workloads affected": a change is mapped to
// workloads through the source index, so the workloads of the namespace that don't use the
// changed ConfigMap are neither looked at (reloader_workloads_scanned_total) nor written.
func TestAChangeLooksOnlyAtTheWorkloadsUsingIt(t *testing.T) {
	const others = 50
	ns := newNamespace(t)
	used, other := configMap(ns, "used", map[string]string{"k": "v1"}), configMap(ns, "other", map[string]string{"k": "v1"})
	user := deployment(ns, "user", map[string]string{auto: "true"}, podSpec("used"))
	objs := []client.Object{used, other, user}
	var bystanders []*appsv1.Deployment
	for i := range others {
		d := deployment(ns, fmt.Sprintf("bystander-%02d", i), map[string]string{auto: "true"}, podSpec("other"))
		bystanders = append(bystanders, d)
		objs = append(objs, d)
	}
	create(t, objs...)
	startReloader(t, ns)
	recorded(t, user)
	var versions []string
	for _, d := range bystanders {
		recorded(t, d)
		versions = append(versions, get(t, d).ResourceVersion)
	}
	changes := templateChanges(t, user)
	series := map[string]string{"kind": "Deployment"}
	scanned, matched := counter(t, "reloader_workloads_scanned_total", series), counter(t, "reloader_workloads_matched_total", series)

	update(t, used, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
	testutil.Eventually(t, "user reloaded", func() error {
		if n := changes(); n != 1 {
			return fmt.Errorf("%d template changes", n)
		}
		return nil
	})
	// The lookup is counted before the reload it queues, so the reload is the signal. An
	// update is looked up for its old and its new object, once when their labels and
	// annotations are alike (the mapping queue keeps one variant): 1 workload, 1 or 2 lookups.
	if got := counter(t, "reloader_workloads_scanned_total", series) - scanned; got < 1 || got > 2 {
		t.Errorf("one change of a ConfigMap used by 1 of %d Deployments looked at %v of them, want 1 or 2 (the old and the new object)", others+1, got)
	}
	if got := counter(t, "reloader_workloads_matched_total", series) - matched; got < 1 || got > 2 {
		t.Errorf("%v Deployments matched, want 1 or 2 (the old and the new object)", got)
	}
	for i, d := range bystanders {
		if rv := get(t, d).ResourceVersion; rv != versions[i] {
			t.Errorf("%s, which does not use the changed ConfigMap, was written", d.Name)
		}
	}
}

// README: a reload of a Deployment is one patch, with either strategy: the template change and
// the record of the hashes it applied are one write of the object.
func TestAReloadIsOneWrite(t *testing.T) {
	t.Parallel()
	for _, strategy := range []string{reload.StrategyEnvVars, reload.StrategyAnnotations} {
		t.Run(strategy, func(t *testing.T) {
			_, cm, d, _ := autoDeployment(t, func(o *options.Options) { o.ReloadStrategy = strategy })
			before, _ := reload.ParseRecord(get(t, d).Annotations[reload.RecordAnnotation])
			writes := writesTo(t, d)
			changes := templateChanges(t, d)
			update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
			testutil.Eventually(t, "reloaded and recorded", func() error {
				got := get(t, d)
				rec, _ := reload.ParseRecord(got.Annotations[reload.RecordAnnotation])
				if changes() != 1 || rec["configmap/cfg"] == "" || rec["configmap/cfg"] == before["configmap/cfg"] {
					return fmt.Errorf("%d template changes, record %v", changes(), rec)
				}
				return nil
			})
			handled(t, d, cm) // room for a second write
			if n := writes(); n != 1 {
				t.Errorf("one reload wrote the Deployment %d times, want 1", n)
			}
		})
	}
}

// writesTo counts the writes of one object from now on: each change its watch delivers, but
// for handled's pokes. (The control plane of these tests runs no controllers, so only the test and
// reloader write workloads.)
func writesTo(t *testing.T, obj client.Object) func() int {
	t.Helper()
	last, writes, started := "", 0, false
	f := followObjects(t, &appsv1.DeploymentList{}, follower.Config{Gaps: follower.GapNone}, func(_ watch.EventType, o client.Object) {
		b, _ := json.Marshal(unpoked(t, o))
		if string(b) != last {
			if started {
				writes++
			}
			last, started = string(b), true
		}
	}, inNamespace(obj.GetNamespace(), obj.GetName())...)
	return func() int {
		f.CaughtUp(t)
		f.Lock()
		defer f.Unlock()
		return writes
	}
}
