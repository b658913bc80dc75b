package workload

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestPodTemplateIsTheObjects(t *testing.T) {
	for _, k := range append(Builtin(), Rollout(), DeploymentConfig()) {
		obj := k.NewObject()
		if k.Name() == "DeploymentConfig" {
			// Its template is a pointer; with none there is nothing to point into.
			k.PodTemplate(obj).Spec.Containers = []corev1.Container{{Name: "app"}}
			if len(k.PodTemplate(obj).Spec.Containers) != 0 {
				t.Errorf("DeploymentConfig: PodTemplate of an empty object wrote into the object")
			}
			continue
		}
		k.PodTemplate(obj).Spec.Containers = []corev1.Container{{Name: "app"}}
		if got := k.PodTemplate(obj).Spec.Containers; len(got) != 1 {
			t.Errorf("%s: PodTemplate does not point into the object", k.Name())
		}
		if k.NewList() == nil {
			t.Errorf("%s: NewList returned nil", k.Name())
		}
	}
}

func TestPatchKindFollowsTheAPI(t *testing.T) {
	tests := []struct {
		kind Kind
		want string
	}{
		{Deployment(), "application/strategic-merge-patch+json"},
		{Job(), "application/strategic-merge-patch+json"},
		{Rollout(), "application/merge-patch+json"},
		{DeploymentConfig(), "application/merge-patch+json"},
	}
	for _, tt := range tests {
		if got := string(tt.kind.PatchFrom(tt.kind.NewObject()).Type()); got != tt.want {
			t.Errorf("%s: patch type %s, want %s", tt.kind.Name(), got, tt.want)
		}
	}
}

func TestJobReplacementDropsWhatTheAPIServerGenerated(t *testing.T) {
	uidLabels := map[string]string{"controller-uid": "u1", batchv1.ControllerUidLabel: "u1", "app": "x"}
	old := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns", UID: "u1", ResourceVersion: "7", Labels: uidLabels,
			Annotations: map[string]string{"a": "b"}},
		Spec: batchv1.JobSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: "u1"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: uidLabels}},
		},
		Status: batchv1.JobStatus{Succeeded: 1},
	}
	got := Job().(Recreated).Replacement(old).(*batchv1.Job)
	if got.UID != "" || got.ResourceVersion != "" || got.Spec.Selector != nil || got.Status.Succeeded != 0 {
		t.Errorf("generated fields kept: %+v", got)
	}
	for _, labels := range []map[string]string{got.Labels, got.Spec.Template.Labels} {
		if labels["controller-uid"] != "" || labels[batchv1.ControllerUidLabel] != "" || labels["app"] != "x" {
			t.Errorf("labels = %v, want only app=x", labels)
		}
	}
	if old.Labels["controller-uid"] != "u1" {
		t.Error("Replacement modified the old Job")
	}
	if got.Annotations["a"] != "b" {
		t.Errorf("annotations lost: %v", got.Annotations)
	}
}

func TestCronJobRunNowIsOwnedAndMarkedManual(t *testing.T) {
	cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u"}}
	cj.Spec.JobTemplate.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app"}}
	var k client.Object = CronJob().(Scheduled).RunNow(cj, "c-reload-1")
	j := k.(*batchv1.Job)
	if j.Name != "c-reload-1" || j.Annotations["cronjob.kubernetes.io/instantiate"] != "manual" {
		t.Errorf("job = %s %v", j.Name, j.Annotations)
	}
	if len(j.OwnerReferences) != 1 || j.OwnerReferences[0].UID != "u" || !*j.OwnerReferences[0].Controller {
		t.Errorf("owner references = %+v", j.OwnerReferences)
	}
	if len(j.Spec.Template.Spec.Containers) != 1 {
		t.Error("template not copied")
	}
}
