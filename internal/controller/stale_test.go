package controller_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/reloader-operator/reloader/internal/coalesce"
	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/report"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/workload"
)

// reasons counts the Events a reconciler emits, by reason.
type reasons struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *reasons) Eventf(_, _ runtime.Object, _, reason, _, _ string, _ ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n[reason]++
}

func (r *reasons) AnnotatedEventf(_, _ runtime.Object, _ map[string]string, _, reason, _, _ string, _ ...any) {
	r.Eventf(nil, nil, "", reason, "", "")
}

func (r *reasons) count(reason string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[reason]
}

// A reconcile that reads a stale copy of a workload (a cache behind its own write) plans the
// same reload again. It must not roll the workload a second time, nor report a second reload,
// with either strategy.
func TestAReloadPlannedFromAStaleCopyRollsOnce(t *testing.T) {
	t.Parallel()
	for _, name := range []string{reload.StrategyEnvVars, reload.StrategyAnnotations} {
		t.Run(name, func(t *testing.T) {
			ns := newNamespace(t)
			cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
			d := deployment(ns, "web", map[string]string{auto: "true"}, podSpec("cfg"))
			create(t, cm, d)
			strategy, err := reload.NewStrategy(name)
			testutil.Must(t, err)
			events := &reasons{n: map[string]int{}}
			// Reads and writes go straight to the API server: the test chooses the copy.
			r := &controller.WorkloadReconciler{
				Client: k8s, Kind: workload.Deployment(), Reads: controller.Reads{Sources: []sourcecache.SourceType{sourcecache.ConfigMaps}},
				Settings: controller.Settings{Policy: reload.Policy{Keys: reload.DefaultKeys()}, Strategy: strategy}, Window: coalesce.New(0),
				Report: report.New(events, metrics.New(prometheus.NewRegistry(), false), nil), Now: time.Now,
			}
			ctx := context.Background()
			if outcome, err := r.ReconcileCopy(ctx, get(t, d)); err != nil || outcome != metrics.OutcomeRecorded {
				t.Fatalf("first reconcile: %s, %v; want recorded", outcome, err)
			}
			stale := get(t, d).DeepCopy() // recorded, before the change
			rollouts := templateChanges(t, d)
			update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })

			if outcome, err := r.ReconcileCopy(ctx, stale.DeepCopy()); err != nil || outcome != metrics.OutcomeReloaded {
				t.Fatalf("reload: %s, %v", outcome, err)
			}
			time.Sleep(1100 * time.Millisecond) // a clock of second resolution has moved on
			outcome, err := r.ReconcileCopy(ctx, stale.DeepCopy())
			if !apierrors.IsConflict(err) {
				t.Errorf("the same reload from the stale copy again: %s, %v; want a conflict, and a retry from the new copy", outcome, err)
			}
			if outcome, err := r.ReconcileCopy(ctx, get(t, d)); err != nil || outcome != metrics.OutcomeUnchanged {
				t.Errorf("the retry from the new copy: %s, %v; want unchanged", outcome, err)
			}
			// No manager runs here: the reconciles above have returned, and rollouts catches up.
			if n := rollouts(); n != 1 {
				t.Errorf("template changed %d times, want 1", n)
			}
			if n := events.count(controller.ReasonReloaded); n != 1 {
				t.Errorf("%d Reloaded Events, want 1", n)
			}
		})
	}
}

// --reload-on-delete with env-vars on a workload that never got the env var: there is none
// to remove, and the deletion must still roll the pods (and only then be reported).
func TestReloadOnDeleteRollsAWorkloadThatNeverGotTheEnvVar(t *testing.T) {
	t.Parallel()
	ns, cm, d, _ := autoDeployment(t, func(o *options.Options) { o.ReloadOnDelete, o.ReloadOnCreate = true, true })
	rollouts := templateChanges(t, d)
	testutil.Must(t, k8s.Delete(context.Background(), cm))
	testutil.Eventually(t, "deletion marked in the env var", func() error {
		if v, _ := envOf(&get(t, d).Spec.Template, "app", cfgEnv); v != reload.Deleted {
			return fmt.Errorf("%s = %q, want %q", cfgEnv, v, reload.Deleted)
		}
		return nil
	})
	eventuallyEvent(t, ns, d.Name, controller.ReasonReloaded)

	// Created again (--reload-on-create): the env var takes its hash, and the pods roll again.
	create(t, configMap(ns, "cfg", map[string]string{"k": "v1"}))
	testutil.Eventually(t, "hash after re-creation", func() error {
		if v, ok := envOf(&get(t, d).Spec.Template, "app", cfgEnv); !ok || v == reload.Deleted {
			return fmt.Errorf("%s = %q", cfgEnv, v)
		}
		return nil
	})
	handled(t, d)
	if n := rollouts(); n != 2 {
		t.Errorf("template changed %d times, want 2 (delete, re-create)", n)
	}
}
