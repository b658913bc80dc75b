package workload

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type cronJob struct {
	typed[batchv1.CronJob, batchv1.CronJobList, *batchv1.CronJob, *batchv1.CronJobList]
}

// CronJob adapts batch/v1 CronJobs: a reload changes the job template, so the next scheduled
// run uses the new config.
func CronJob() Kind {
	return cronJob{newTyped[batchv1.CronJob, batchv1.CronJobList]("CronJob",
		Description{Resource: batchv1.SchemeGroupVersion.WithResource("cronjobs"), Short: []string{"cj"}},
		func(c *batchv1.CronJob) *corev1.PodTemplateSpec { return &c.Spec.JobTemplate.Spec.Template })}
}

func (cronJob) Suspended(obj client.Object) bool {
	s := obj.(*batchv1.CronJob).Spec.Suspend
	return s != nil && *s
}

// RunNow builds the Job that `kubectl create job --from=cronjob/...` would.
func (cronJob) RunNow(obj client.Object, name string) client.Object {
	cj := obj.(*batchv1.CronJob)
	tpl := cj.Spec.JobTemplate.DeepCopy()
	ann := tpl.Annotations
	if ann == nil {
		ann = map[string]string{}
	}
	ann["cronjob.kubernetes.io/instantiate"] = "manual"
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   cj.Namespace,
			Labels:      tpl.Labels,
			Annotations: ann,
			OwnerReferences: []metav1.OwnerReference{
				*metav1.NewControllerRef(cj, batchv1.SchemeGroupVersion.WithKind("CronJob")),
			},
		},
		Spec: tpl.Spec,
	}
}
