package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// A Job replacement is written down before the delete. While the API server refuses the
// delete, the Job stays as it is and the record is not left to re-create it later; once
// deletes are allowed again, the Job is replaced exactly once and the record goes.
func TestJobReplacementWhoseDeleteIsRefusedHappensOnceWhenAllowed(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm, j, oldUID, _ := recordedJob(t, ns)

	ctx := context.Background()
	lift := deny(t, ns, admissionv1.Delete, "batch", "jobs", func() error {
		probe := job(ns, fmt.Sprintf("probe-%d", time.Now().UnixNano()), nil)
		if err := k8s.Create(ctx, probe); err != nil {
			return nil // not a refused delete; try again
		}
		return k8s.Delete(ctx, probe)
	})
	changeConfig(t, cm, "v2")
	eventuallyEvent(t, ns, "migrate", controller.ReasonReloadFail)
	handled(t, j, cm)
	if uid := get(t, j).UID; uid != oldUID {
		t.Fatalf("Job replaced although its delete is refused: UID %s -> %s", oldUID, uid)
	}
	lift()
	cur := replaced(t, j, oldUID)
	testutil.Eventually(t, "no replacement record left", func() error {
		var records appsv1.ControllerRevisionList
		if err := k8s.List(ctx, &records, client.InNamespace(ns), client.HasLabels{controller.ReplacementLabel}); err != nil {
			return err
		}
		if n := len(records.Items); n > 0 {
			return fmt.Errorf("%d records", n)
		}
		return nil
	})
	handled(t, cur, cm)
	if uid := get(t, j).UID; uid != cur.UID {
		t.Errorf("Job replaced twice: %s -> %s -> %s", oldUID, cur.UID, uid)
	}
}
