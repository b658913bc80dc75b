package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/report"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/workload"
)

// A Job's replacement is under way, its create refused for now, held by reloader in memory
// (unsigned: no namespace of its own). Someone who may create ControllerRevisions writes one
// called "x" that says it replaces the same Job. It is refused as misnamed, with an Event and
// a count, and the replacement under way is not let go: once creates are allowed again, the
// Job is re-created.
func TestMisnamedRecordLeavesTheReplacementUnderWay(t *testing.T) {
	ns := newNamespace(t)
	cm, j, oldUID, _ := recordedJob(t, ns)
	lift := refuseReplacement(t, cm, j)

	misnamed := map[string]string{"kind": "Job", "reason": "misnamed"}
	before := counter(t, refusedRecords, misnamed)
	forged := forgedRecord(ns, "migrate", j, "")
	forged.Name = "x"
	create(t, forged)
	eventuallyEvent(t, ns, "x", controller.ReasonUntrustedRecord)
	testutil.Eventually(t, "misnamed record counted", func() error {
		if n := counter(t, refusedRecords, misnamed); n < before+1 {
			return fmt.Errorf("%v refused as misnamed, want %v", n, before+1)
		}
		return nil
	})
	lift()
	replaced(t, j, oldUID)
}

// Someone deletes a Job between reloader's read and its delete, and the API server refuses,
// for every retry, the delete of the record reloader wrote: the replacement is held, marked
// never to be created, and the error has the pass retried. The next pass drops the record
// and creates nothing: the Job the user deleted stays deleted.
func TestJobDeletedMeanwhileIsNeverRecreated(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	j := job(ns, "gone", nil)
	create(t, j)
	old := get(t, j).DeepCopy()
	nn := client.ObjectKeyFromObject(old)
	testutil.Must(t, k8s.Delete(ctx, old.DeepCopy(), client.PropagationPolicy(metav1.DeletePropagationBackground)))
	testutil.Eventually(t, "Job deleted by the user", func() error {
		if err := k8s.Get(ctx, nn, &batchv1.Job{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Job still there: %v", err)
		}
		return nil
	})
	lift := deny(t, ns, admissionv1.Delete, "apps", "controllerrevisions", func() error {
		probe := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("probe-%d", time.Now().UnixNano())},
			Data: runtime.RawExtension{Raw: []byte(`{}`)}, Revision: 1}
		testutil.Must(t, k8s.Create(ctx, probe))
		return k8s.Delete(ctx, probe)
	})

	r := &controller.WorkloadReconciler{Client: k8s, Kind: workload.Job(), Report: report.New(&notes{}, metrics.New(prometheus.NewRegistry(), false), nil)}
	err := r.Replace(ctx, old, job(ns, "gone", nil))
	if err == nil || !strings.Contains(err.Error(), "delete replacement record") {
		t.Fatalf("replacement of a Job deleted meanwhile, its record not deletable: %v; want the record's delete refused", err)
	}
	if held, drop := r.Pending(nn); !held || !drop {
		t.Fatalf("replacement held %v, marked to drop %v; want held and marked while its record stays", held, drop)
	}
	lift()
	testutil.Eventually(t, "record dropped on the next pass", func() error {
		if _, err := r.FinishPending(ctx, nn); err != nil {
			return err
		}
		var records appsv1.ControllerRevisionList
		testutil.Must(t, k8s.List(ctx, &records, client.InNamespace(ns), client.HasLabels{controller.ReplacementLabel}))
		if n := len(records.Items); n > 0 {
			return fmt.Errorf("%d records", n)
		}
		return nil
	})
	if held, _ := r.Pending(nn); held {
		t.Error("replacement still held after its record was dropped")
	}
	if err := k8s.Get(ctx, nn, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Errorf("Job the user deleted was re-created: %v", err)
	}
}

// A namespace at its ResourceQuota of Jobs: a dry-run create of one more is refused, but the
// replacement takes the old Job's place, so a reload of a Job there goes ahead.
func TestJobAtItsQuotaIsReplaced(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	const count = corev1.ResourceName("count/jobs.batch")
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "jobs"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{count: resource.MustParse("1")}}}
	create(t, quota)
	// No quota controller runs here: the test keeps the quota's status as it would, at the
	// start and once the old Job is deleted.
	setUsed := func(n string) {
		testutil.Eventually(t, "quota status set", func() error {
			q := get(t, quota)
			q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{count: resource.MustParse(n)}}
			return k8s.Status().Update(ctx, q)
		})
	}
	setUsed("0")
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	j := job(ns, "migrate", map[string]string{auto: "true"}, "cfg")
	create(t, cm)
	testutil.Eventually(t, "Job created under the quota", func() error { return k8s.Create(ctx, j) })

	// The API server's wording, which the dry run's refusal is recognised by.
	err := k8s.Create(ctx, job(ns, "one-more", nil), client.DryRunAll)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota: jobs, requested: count/jobs.batch=1, used: count/jobs.batch=1, limited: count/jobs.batch=1") {
		t.Fatalf("dry run of a Job over the quota: %v", err)
	}

	startReloader(t, ns)
	recorded(t, j)
	oldUID := get(t, j).UID
	changeConfig(t, cm, "v2")
	testutil.Eventually(t, "old Job deleted", func() error {
		var cur batchv1.Job
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(j), &cur); err == nil && cur.UID == oldUID {
			return fmt.Errorf("old Job still there")
		}
		return nil
	})
	setUsed("0")
	replaced(t, j, oldUID)
}
