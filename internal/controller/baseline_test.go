package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// At start-up every workload waits in the queue for its first reconcile. A change that lands
// before a workload's turn is a change since reloader first saw it, and must roll it out, not
// become its baseline. A workload created later is first seen when it is created.
func TestChangesWhileFirstReconcilesAreQueuedAreAllRolledOutOnce(t *testing.T) {
	t.Run("workloads there at start-up", func(t *testing.T) { changesDuringBacklog(t, false) })
	t.Run("workloads created after start-up", func(t *testing.T) { changesDuringBacklog(t, true) })
}

func changesDuringBacklog(t *testing.T, createdAfterStart bool) {
	const deployments, configMaps, changed = 300, 100, 50
	ns := newNamespace(t)
	ctx := context.Background()
	for i := range configMaps {
		create(t, configMap(ns, fmt.Sprintf("cfg-%03d", i), map[string]string{"k": "v1"}))
	}
	uses := map[string]string{} // Deployment -> its ConfigMap
	for i := range deployments {
		uses[fmt.Sprintf("web-%03d", i)] = fmt.Sprintf("cfg-%03d", i%configMaps)
	}
	createDeployments := func() {
		// Eight at a time, faster than one worker records them.
		var wg sync.WaitGroup
		errs := make(chan error, deployments)
		names := make(chan string, deployments)
		for name := range uses {
			names <- name
		}
		close(names)
		for range 8 {
			wg.Go(func() {
				for name := range names {
					errs <- k8s.Create(ctx, deployment(ns, name, map[string]string{auto: "true"}, podSpec(uses[name])))
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			testutil.Must(t, err)
		}
	}

	// One worker makes the backlog real: the first reconciles take seconds to drain.
	var rollouts func(string) int
	if createdAfterStart {
		startReloader(t, ns, func(o *options.Options) { o.Workers = 1 })
		rollouts = templateChangesIn(t, ns)
		createDeployments()
	} else {
		createDeployments()
		rollouts = templateChangesIn(t, ns)
		startReloader(t, ns, func(o *options.Options) { o.Workers = 1 })
	}
	for i := range changed {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cfg-%03d", i)}}
		update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
	}

	affected := func(name string) bool {
		var i int
		_, _ = fmt.Sscanf(uses[name], "cfg-%03d", &i)
		return i < changed
	}
	testutil.Eventually(t, "every Deployment recorded, and the affected ones reloaded", func() error {
		var list appsv1.DeploymentList
		if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		missing, missed := 0, 0
		for _, d := range list.Items {
			if _, ok := d.Annotations[reload.RecordAnnotation]; !ok {
				missing++
				continue
			}
			if affected(d.Name) {
				if _, ok := envOf(&d.Spec.Template, "app", reload.EnvVarName(source.ID{Kind: source.ConfigMap, Name: uses[d.Name]})); !ok {
					missed++
				}
			}
		}
		if missing+missed > 0 {
			return fmt.Errorf("%d Deployments not recorded, %d affected ones not reloaded", missing, missed)
		}
		return nil
	})
	var all appsv1.DeploymentList
	testutil.Must(t, k8s.List(ctx, &all, client.InNamespace(ns)))
	var workloads, written []client.Object
	for i := range all.Items {
		workloads = append(workloads, &all.Items[i])
	}
	for i := range changed {
		written = append(written, configMap(ns, fmt.Sprintf("cfg-%03d", i), nil))
	}
	handledAll(t, workloads, written...)

	var list appsv1.DeploymentList
	testutil.Must(t, k8s.List(ctx, &list, client.InNamespace(ns)))
	missed, duplicates, unwanted := 0, 0, 0
	for _, d := range list.Items {
		cm := uses[d.Name]
		n := rollouts(d.Name)
		if !affected(d.Name) {
			if n != 0 {
				unwanted++
			}
			continue
		}
		rec, err := reload.ParseRecord(d.Annotations[reload.RecordAnnotation])
		testutil.Must(t, err)
		env, _ := envOf(&d.Spec.Template, "app", reload.EnvVarName(source.ID{Kind: source.ConfigMap, Name: cm}))
		if want := rec[source.ID{Kind: source.ConfigMap, Name: cm}.String()]; env == "" || env != want {
			missed++ // the template must carry the hash of the final content
		}
		if n > 1 {
			duplicates++
		}
	}
	if missed+duplicates+unwanted > 0 {
		t.Errorf("of %d Deployments using %d changed ConfigMaps: %d missed, %d rolled more than once; %d unaffected rolled",
			deployments*changed/configMaps, changed, missed, duplicates, unwanted)
	}
}

// templateChangesIn counts, per Deployment name in ns, how often its pod template changes.
func templateChangesIn(t *testing.T, ns string) func(name string) int {
	t.Helper()
	last, changes := map[string]string{}, map[string]int{}
	f := watchObjects(t, &appsv1.DeploymentList{}, ns, "", func(typ watch.EventType, o client.Object) {
		d, ok := o.(*appsv1.Deployment)
		if !ok || (typ != watch.Added && typ != watch.Modified) {
			return
		}
		b, _ := json.Marshal(d.Spec.Template)
		if typ == watch.Modified && last[d.Name] != string(b) {
			changes[d.Name]++
		}
		last[d.Name] = string(b)
	})
	return func(name string) int {
		f.CaughtUpOn(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
		f.Lock()
		defer f.Unlock()
		return changes[name]
	}
}
