package controller_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// A reload's write comes back through the watch and is not reconciled again: after the
// reload, the next reconcile of the workload is the one a later change asks for (a poke).
func TestOwnWriteComingBackIsNotReconciled(t *testing.T) {
	t.Parallel()
	ns, cm, d, _ := autoDeployment(t)
	rel := reloaders.in(ns)
	handled(t, d)
	since := time.Now()
	record := get(t, d).Annotations[reload.RecordAnnotation]

	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
	testutil.Eventually(t, "reloaded", func() error {
		if got := get(t, d); got.Annotations[reload.RecordAnnotation] == record {
			return fmt.Errorf("record unchanged: %s", record)
		}
		return nil
	})
	rel.holds(t, get(t, d)) // the write is in the cache, and on its way to the handlers
	handled(t, d, cm)

	var outcomes []string
	rel.mu.Lock()
	for _, rec := range rel.log {
		if rec.Kind == "Deployment" && rec.Name == d.Name && rec.Namespace == ns && rec.Started.After(since) &&
			rec.Outcome != metrics.OutcomeWaiting && rec.Outcome != metrics.OutcomeConflict {
			outcomes = append(outcomes, rec.Outcome)
		}
	}
	rel.mu.Unlock()
	// The reload, then the poke's reconcile; the write's echo between them was dropped.
	if len(outcomes) != 2 || outcomes[0] != metrics.OutcomeReloaded {
		t.Fatalf("reconciles of %s since the change: %v, want [%s %s]", client.ObjectKeyFromObject(d), outcomes, metrics.OutcomeReloaded, metrics.OutcomeUnchanged)
	}
}

// A source change reaches a recorded workload when its coalescing window closes: one
// reconcile, the reload, and not first a reconcile that only finds the window open and
// comes back (mapping.go queues it for the window's end).
func TestAChangeIsReconciledOnceItsWindowCloses(t *testing.T) {
	t.Parallel()
	ns, cm, d, _ := autoDeployment(t)
	rel := reloaders.in(ns)
	handled(t, d)
	nn := client.ObjectKeyFromObject(d)
	since := time.Now()
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
	var outcomes []string
	testutil.Eventually(t, "the reload's reconcile ended", func() error {
		outcomes = rel.outcomesSince("Deployment", nn, since)
		if !slices.Contains(outcomes, metrics.OutcomeReloaded) {
			return fmt.Errorf("outcomes since the change: %v", outcomes)
		}
		return nil
	})
	before := outcomes[:slices.Index(outcomes, metrics.OutcomeReloaded)]
	if slices.Contains(before, metrics.OutcomeWaiting) {
		t.Errorf("reconciles of %s since the change: %v, want the reload with no wait before it", nn, outcomes)
	}
}
