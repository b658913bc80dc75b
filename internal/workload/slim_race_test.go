package workload

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/cachemem/intern"
	"github.com/reloader-operator/reloader/internal/extapi"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// The informer hands SlimTransform a workload its cache already holds (a re-list during a
// shard hand-over, the watch's deletion of it) while handlers read that copy: the second pass
// writes nothing to it, whether the first dropped the status or kept it, slimmed the template
// or kept it, dropped the labels or interned them. make test runs this under -race.
func TestSlimSecondPassWritesNothing(t *testing.T) {
	followed := func(client.Object) bool { return true }
	sts := func() *appsv1.StatefulSet {
		return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db", Generation: 2, Labels: map[string]string{"app": "db"},
			Annotations:   map[string]string{LastAppliedAnnotation: "{}", "reloader.stakater.com/auto": "true"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
			Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, Template: richTemplate(),
				VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 1}}
	}
	job := func() *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "migrate", Generation: 1, Labels: map[string]string{"app": "migrate"},
			Annotations: map[string]string{LastAppliedAnnotation: "{}"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
			Spec:   batchv1.JobSpec{Template: richTemplate()},
			Status: batchv1.JobStatus{Succeeded: 1}}
	}
	rollout := func() *extapi.Rollout {
		return &extapi.Rollout{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "r", Generation: 2, Labels: map[string]string{"app": "r"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "argo"}}},
			Spec:   extapi.RolloutSpec{Template: richTemplate()},
			Status: extapi.RolloutStatus{ObservedGeneration: "2", Replicas: 2}}
	}
	pending := decode[appsv1.Deployment](t, appliedDeployment())
	pending.Generation = 4
	for _, c := range []struct {
		name     string
		kind     Kind
		followed func(client.Object) bool
		obj      client.Object
	}{
		{"Deployment, status dropped", Deployment(), nil, decode[appsv1.Deployment](t, appliedDeployment())},
		{"Deployment, rollout followed", Deployment(), followed, decode[appsv1.Deployment](t, appliedDeployment())},
		{"Deployment, generation not observed", Deployment(), nil, pending},
		{"StatefulSet", StatefulSet(), nil, sts()},
		{"Rollout, merge patched", Rollout(), nil, rollout()},
		{"Job, kept whole", Job(), nil, job()},
	} {
		for _, dropLabels := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, dropLabels %v", c.name, dropLabels), func(t *testing.T) {
				slim := SlimTransform(c.kind, c.followed, dropLabels, intern.New())
				testutil.SecondPass(t, slim, c.obj.DeepCopyObject().(client.Object))
			})
		}
	}
}
