package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/extapi"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil"
)

const cfgEnv = "STAKATER_CFG_CONFIGMAP"

func cronJob(ns, name string, annotations map[string]string, configMaps ...string) *batchv1.CronJob {
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec: batchv1.CronJobSpec{
			Schedule:    "0 0 1 1 *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: jobPodSpec(configMaps...)}},
		},
	}
}

func job(ns, name string, annotations map[string]string, configMaps ...string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec:       batchv1.JobSpec{Template: jobPodSpec(configMaps...)},
	}
}

func jobPodSpec(configMaps ...string) corev1.PodTemplateSpec {
	tpl := podSpec(configMaps...)
	tpl.Labels = nil
	tpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	return tpl
}

func jobs(t *testing.T, ns string) []batchv1.Job {
	t.Helper()
	var list batchv1.JobList
	testutil.Must(t, k8s.List(context.Background(), &list, client.InNamespace(ns)))
	return list.Items
}

func changeConfig(t *testing.T, cm *corev1.ConfigMap, value string) {
	t.Helper()
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = value })
}

func hasEnv(tpl *corev1.PodTemplateSpec, name string) error {
	if _, ok := envOf(tpl, "app", name); !ok {
		return fmt.Errorf("no %s on container app", name)
	}
	return nil
}

// By default a CronJob reload changes the job template, for the next scheduled run, and
// starts no Job: the complaint about upstream is that it does.
func TestCronJobReloadChangesTheJobTemplateAndStartsNoJob(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	cj := cronJob(ns, "nightly", map[string]string{auto: "true"}, "cfg")
	create(t, cm, cj)
	startReloader(t, ns)
	recorded(t, cj)
	changes := templateChanges(t, cj, "spec", "jobTemplate", "spec", "template")

	changeConfig(t, cm, "v2")
	testutil.Eventually(t, "job template reloaded", func() error { return hasEnv(&get(t, cj).Spec.JobTemplate.Spec.Template, cfgEnv) })
	handled(t, cj, cm)
	if n := changes(); n != 1 {
		t.Errorf("job template changed %d times, want 1", n)
	}
	if js := jobs(t, ns); len(js) != 0 {
		t.Errorf("reload started %d Jobs, want none", len(js))
	}
}

// With the opt-in a reload also starts one Job now, never for a suspended CronJob.
func TestCronJobRunsOnReloadWhenAskedUnlessSuspended(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	byAnnotation := cronJob(ns, "by-annotation", map[string]string{auto: "true", reload.RunOnReloadAnnotation: "true"}, "cfg")
	byFlag := cronJob(ns, "by-flag", map[string]string{auto: "true"}, "cfg")
	optedOut := cronJob(ns, "opted-out", map[string]string{auto: "true", reload.RunOnReloadAnnotation: "false"}, "cfg")
	suspended := cronJob(ns, "suspended", map[string]string{auto: "true"}, "cfg")
	suspended.Spec.Suspend = ptr.To(true)
	create(t, cm, byAnnotation, byFlag, optedOut, suspended)
	startReloader(t, ns, func(o *options.Options) { o.RunCronJobsOnReload = true })
	for _, cj := range []*batchv1.CronJob{byAnnotation, byFlag, optedOut, suspended} {
		recorded(t, cj)
	}

	changeConfig(t, cm, "v2")
	for _, cj := range []*batchv1.CronJob{byAnnotation, byFlag, optedOut, suspended} {
		testutil.Eventually(t, cj.Name+" reloaded", func() error { return hasEnv(&get(t, cj).Spec.JobTemplate.Spec.Template, cfgEnv) })
	}
	for _, cj := range []*batchv1.CronJob{byAnnotation, byFlag, optedOut, suspended} {
		handled(t, cj, cm)
	}
	owners := map[string]int{}
	for _, j := range jobs(t, ns) {
		for _, ref := range j.OwnerReferences {
			owners[ref.Name]++
		}
		if err := hasEnv(&j.Spec.Template, cfgEnv); err != nil {
			t.Errorf("Job %s runs the old template: %v", j.Name, err)
		}
	}
	want := map[string]int{"by-annotation": 1, "by-flag": 1}
	if fmt.Sprint(owners) != fmt.Sprint(want) {
		t.Errorf("Jobs started per CronJob = %v, want %v", owners, want)
	}
}

// A Job's pod template is immutable: a reload replaces the Job by one of the same name.
func TestJobIsReplacedWithTheNewConfig(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	j := job(ns, "migrate", map[string]string{auto: "true"}, "cfg")
	j.Spec.BackoffLimit = ptr.To[int32](2)
	create(t, cm, j)
	startReloader(t, ns)
	recorded(t, j)
	oldUID := get(t, j).UID

	changeConfig(t, cm, "v2")
	cur := replaced(t, j, oldUID)
	if *cur.Spec.BackoffLimit != 2 || cur.Annotations[auto] != "true" {
		t.Errorf("replacement lost the user's spec or annotations: backoffLimit %d, annotations %v", *cur.Spec.BackoffLimit, cur.Annotations)
	}
	eventuallyEvent(t, ns, "migrate", controller.ReasonReloaded)
}

// If the replacement can't be created, the Job is kept in memory and created once possible.
func TestJobReplacementIsRetriedUntilCreated(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	j := job(ns, "migrate", map[string]string{auto: "true"}, "cfg")
	create(t, cm, j)
	startReloader(t, ns)
	recorded(t, j)

	lift := deny(t, ns, admissionv1.Create, "batch", "jobs", func() error {
		return k8s.Create(context.Background(), job(ns, fmt.Sprintf("probe-%d", time.Now().UnixNano()), nil))
	})
	changeConfig(t, cm, "v2")
	eventuallyEvent(t, ns, "migrate", controller.ReasonReloadFail)
	lift()
	replaced(t, j, "")
}

// Finished Jobs are re-run with the new config by default, as upstream does. A Job that opts
// out with the annotation, or every Job with --recreate-finished-jobs=false (unless it opts
// in), is left alone with an Event saying why.
func TestFinishedJobsAreReRunUnlessOptedOut(t *testing.T) {
	t.Parallel()
	for _, flag := range []bool{true, false} {
		t.Run(fmt.Sprintf("recreate-finished-jobs=%v", flag), func(t *testing.T) {
			ns := newNamespace(t)
			cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
			plain := job(ns, "plain", map[string]string{auto: "true"}, "cfg")
			optIn := job(ns, "opt-in", map[string]string{auto: "true", reload.RecreateFinishedAnnotation: "true"}, "cfg")
			optOut := job(ns, "opt-out", map[string]string{auto: "true", reload.RecreateFinishedAnnotation: "false"}, "cfg")
			all := []*batchv1.Job{plain, optIn, optOut}
			create(t, cm, plain, optIn, optOut)
			uids := map[string]types.UID{}
			for _, j := range all {
				finish(t, j)
			}
			startReloader(t, ns, func(o *options.Options) { o.RecreateFinishedJobs = flag })
			for _, j := range all {
				recorded(t, j)
				uids[j.Name] = get(t, j).UID
			}

			changeConfig(t, cm, "v2")
			rerun, left := []*batchv1.Job{optIn}, []*batchv1.Job{optOut}
			if flag {
				rerun = append(rerun, plain)
			} else {
				left = append(left, plain)
			}
			for _, j := range rerun {
				replaced(t, j, uids[j.Name])
			}
			for _, j := range left {
				eventuallyEvent(t, ns, j.Name, controller.ReasonReloadSkipped)
				if cur := get(t, j); cur.UID != uids[j.Name] || hasEnv(&cur.Spec.Template, cfgEnv) == nil {
					t.Errorf("finished Job %s was replaced or changed", j.Name)
				}
			}
		})
	}
}

// replaced waits until the Job named like j is no longer the one with UID old, and runs the
// new config; it returns the replacement.
func replaced(t *testing.T, j *batchv1.Job, old types.UID) *batchv1.Job {
	t.Helper()
	cur := &batchv1.Job{}
	testutil.Eventually(t, "Job "+j.Name+" replaced", func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(j), cur); err != nil {
			return err
		}
		if cur.UID == old {
			return fmt.Errorf("still the old Job")
		}
		return hasEnv(&cur.Spec.Template, cfgEnv)
	})
	return cur
}

// finish marks a Job complete, as the Job controller would.
func finish(t *testing.T, j *batchv1.Job) {
	t.Helper()
	now := metav1.Now()
	update(t, j, func(j *batchv1.Job) {})
	j.Status = batchv1.JobStatus{
		StartTime:      &now,
		CompletionTime: &now,
		Succeeded:      1,
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
	}
	testutil.Must(t, k8s.Status().Update(context.Background(), j))
}

// --ignored-workload-types leaves those kinds alone entirely: not even recorded.
func TestIgnoredWorkloadTypesAreLeftAlone(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	cj := cronJob(ns, "nightly", map[string]string{auto: "true"}, "cfg")
	j := job(ns, "migrate", map[string]string{auto: "true"}, "cfg")
	d := deployment(ns, "web", map[string]string{auto: "true"}, podSpec("cfg"))
	create(t, cm, cj, j, d)
	startReloader(t, ns, func(o *options.Options) { o.IgnoredWorkloadTypes = []string{"jobs", "cronjobs"} })
	recorded(t, d)

	changeConfig(t, cm, "v2")
	testutil.Eventually(t, "Deployment reloaded", func() error { return hasEnv(&get(t, d).Spec.Template, cfgEnv) })
	handled(t, d, cm) // no reconciler reads the ignored kinds: d's handling is the change's
	if _, ok := get(t, cj).Annotations[reload.RecordAnnotation]; ok {
		t.Error("ignored CronJob was recorded")
	}
	if _, ok := get(t, j).Annotations[reload.RecordAnnotation]; ok {
		t.Error("ignored Job was recorded")
	}
}

func rollout(ns, name string, annotations map[string]string, tpl corev1.PodTemplateSpec) *extapi.Rollout {
	return &extapi.Rollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec:       extapi.RolloutSpec{Template: tpl},
	}
}

// Argo Rollouts roll by template change, or restart with rollout-strategy: restart; a Rollout
// with workloadRef runs a Deployment's template, which is where the change goes.
func TestArgoRolloutsReload(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	rolled := rollout(ns, "rolled", map[string]string{auto: "true"}, podSpec("cfg"))
	restarted := rollout(ns, "restarted", map[string]string{auto: "true", "reloader.stakater.com/rollout-strategy": "restart"}, podSpec("cfg"))
	base := deployment(ns, "base", nil, podSpec("cfg"))
	referring := rollout(ns, "referring", map[string]string{auto: "true"}, corev1.PodTemplateSpec{})
	referring.Spec.WorkloadRef = &extapi.WorkloadRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "base"}
	create(t, cm, rolled, restarted, base, referring)
	startReloader(t, ns, func(o *options.Options) { o.IsArgoRollouts = true })
	for _, r := range []*extapi.Rollout{rolled, restarted, referring} {
		recorded(t, r)
	}
	restartedTemplate := get(t, restarted).Spec.Template
	baseChanges := templateChanges(t, base)

	changeConfig(t, cm, "v2")
	testutil.Eventually(t, "rollout strategy: template changed", func() error { return hasEnv(&get(t, rolled).Spec.Template, cfgEnv) })
	testutil.Eventually(t, "restart strategy: restartAt set", func() error {
		if get(t, restarted).Spec.RestartAt == nil {
			return fmt.Errorf("no restartAt")
		}
		return nil
	})
	testutil.Eventually(t, "workloadRef: the Deployment's template changed", func() error { return hasEnv(&get(t, base).Spec.Template, cfgEnv) })
	handledAll(t, []client.Object{rolled, restarted, referring}, cm)
	if got := get(t, restarted).Spec.Template; hasEnv(&got, cfgEnv) == nil || len(got.Spec.Containers) != len(restartedTemplate.Spec.Containers) {
		t.Error("restart strategy changed the template")
	}
	if n := baseChanges(); n != 1 {
		t.Errorf("workloadRef Deployment template changed %d times, want 1", n)
	}
	if rec := get(t, referring).Annotations[reload.RecordAnnotation]; rec == "" || rec == "{}" {
		t.Errorf("workloadRef Rollout record = %q, want the ConfigMap's hash", rec)
	}
	if _, ok := get(t, base).Annotations[reload.RecordAnnotation]; ok {
		t.Error("the unannotated Deployment was recorded as a workload of its own")
	}
}

// Without --is-Argo-Rollouts, Rollouts are not touched.
func TestArgoRolloutsNeedTheFlag(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	r := rollout(ns, "rolled", map[string]string{auto: "true"}, podSpec("cfg"))
	d := deployment(ns, "web", map[string]string{auto: "true"}, podSpec("cfg"))
	create(t, cm, r, d)
	startReloader(t, ns)
	recorded(t, d)
	changeConfig(t, cm, "v2")
	testutil.Eventually(t, "Deployment reloaded", func() error { return hasEnv(&get(t, d).Spec.Template, cfgEnv) })
	handled(t, d, cm) // no reconciler reads Rollouts without the flag: d's handling is the change's
	if got := get(t, r); got.Annotations[reload.RecordAnnotation] != "" || hasEnv(&got.Spec.Template, cfgEnv) == nil {
		t.Error("Rollout touched without --is-Argo-Rollouts")
	}
}

// DeploymentConfigs are found through discovery; no flag needed.
func TestDeploymentConfigsReload(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	tpl := podSpec("cfg")
	dc := &extapi.DeploymentConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "legacy", Annotations: map[string]string{auto: "true"}},
		Spec:       extapi.DeploymentConfigSpec{Template: &tpl},
	}
	create(t, cm, dc)
	startReloader(t, ns)
	recorded(t, dc)
	changes := templateChanges(t, dc)
	changeConfig(t, cm, "v2")
	testutil.Eventually(t, "DeploymentConfig reloaded", func() error { return hasEnv(get(t, dc).Spec.Template, cfgEnv) })
	handled(t, dc, cm)
	if n := changes(); n != 1 {
		t.Errorf("template changed %d times, want 1", n)
	}
}
