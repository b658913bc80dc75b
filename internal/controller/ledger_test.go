package controller_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/ledger"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// With a namespace of its own, reloader keeps first records in its ledger: installing onto
// workloads writes none of them, and a change made while it is stopped still reloads the
// workload it concerns, and only that one, when it starts again.
func TestFirstRecordsInTheLedgerWriteNoWorkloadAndCatchAChangeMadeWhileStopped(t *testing.T) {
	t.Parallel()
	ns, own := newNamespace(t), newNamespace(t)
	withLedger := func(o *options.Options) { o.ReloaderNamespace = own }
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	other := configMap(ns, "other", map[string]string{"k": "v1"})
	web := deployment(ns, "web", map[string]string{auto: "true"}, podSpec("cfg"))
	api := deployment(ns, "api", map[string]string{auto: "true"}, podSpec("other"))
	create(t, cm, other, web, api)
	webChanges, apiChanges := templateChanges(t, web), templateChanges(t, api)
	before := []client.Object{get(t, web).DeepCopy(), get(t, api).DeepCopy()}

	stop := startReloader(t, ns, withLedger)
	inLedger(t, own, web, true)
	inLedger(t, own, api, true)
	handled(t, web)
	handled(t, api)
	for _, b := range before {
		if err := unwritten(t, b); err != nil {
			t.Errorf("%s written for its first record: %v", b.GetName(), err)
		}
	}
	stop()

	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
	startReloader(t, ns, withLedger)
	testutil.Eventually(t, "web reloaded after the start", func() error {
		if n := webChanges(); n != 1 {
			return fmt.Errorf("%d template changes, want 1", n)
		}
		return nil
	})
	handled(t, api)
	if n := apiChanges(); n != 0 {
		t.Errorf("api, whose source did not change, rolled %d times", n)
	}
	// web's record moved onto web with its reload (its ledger entry leaves with the
	// namespace's next write to the ledger).
	if _, ok := get(t, web).Annotations[reload.RecordAnnotation]; !ok {
		t.Error("web reloaded without its record annotation")
	}
	inLedger(t, own, api, true)
}

// inLedger waits until w's entry is in (or out of) the ledger kept in own.
func inLedger(t *testing.T, own string, w client.Object, want bool) {
	t.Helper()
	testutil.Eventually(t, fmt.Sprintf("%s in the ledger: %v", w.GetName(), want), func() error {
		cm := &corev1.ConfigMap{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: own, Name: ledger.Name(w.GetNamespace())}, cm); err != nil {
			return err
		}
		if got := ledger.Holds(cm, get(t, w).GetUID()); got != want {
			return fmt.Errorf("held %v (%d entries)", got, len(cm.Data))
		}
		return nil
	})
}
