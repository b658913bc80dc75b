package workload

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type job struct {
	typed[batchv1.Job, batchv1.JobList, *batchv1.Job, *batchv1.JobList]
}

// Job adapts batch/v1 Jobs. A Job's pod template is immutable, so a reload replaces the Job.
func Job() Kind {
	return job{newTyped[batchv1.Job, batchv1.JobList]("Job",
		Description{Resource: batchv1.SchemeGroupVersion.WithResource("jobs")},
		func(j *batchv1.Job) *corev1.PodTemplateSpec { return &j.Spec.Template })}
}

func (job) Finished(obj client.Object) bool {
	for _, c := range obj.(*batchv1.Job).Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// Labels the API server derives from a Job's UID; a new Job gets its own.
var jobUIDLabels = []string{"controller-uid", batchv1.ControllerUidLabel}

// Replacement copies what the user wrote (metadata, spec) and drops what the API server
// generated for the old Job: its identity, status, and the selector tied to its UID.
func (job) Replacement(obj client.Object) client.Object {
	old := obj.(*batchv1.Job)
	spec := *old.Spec.DeepCopy()
	labels := withoutKeys(old.Labels, jobUIDLabels)
	if spec.ManualSelector == nil || !*spec.ManualSelector {
		spec.Selector = nil
		spec.Template.Labels = withoutKeys(spec.Template.Labels, jobUIDLabels)
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            old.Name,
			Namespace:       old.Namespace,
			Labels:          labels,
			Annotations:     old.Annotations,
			OwnerReferences: old.OwnerReferences,
		},
		Spec: spec,
	}
}

func withoutKeys(m map[string]string, keys []string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	for _, k := range keys {
		delete(out, k)
	}
	return out
}
