package e2e

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testenv/proc"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/testutil/records"
)

// With the real Job, CronJob and Deployment controllers running: a Job is replaced and its
// new pod runs the new config while the old pod goes; a CronJob gets a new job template and no
// Job; a Deployment with a pause period rolls only once the period is over.
func TestJobsCronJobsAndPausePeriodWithRealControllers(t *testing.T) {
	t.Parallel() // its own control plane and reloader
	bin := buildReloader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, cl := startCluster(t, ctx, testenv.Options{Rollouts: true, Nodes: 1})
	var log bytes.Buffer
	defer func() {
		if t.Failed() {
			t.Log(log.String())
		}
	}()
	addr, err := proc.FreeAddr()
	testutil.Must(t, err)
	stop, err := proc.Start(bin, []string{"--metrics-addr=" + addr}, cluster.Kubeconfig, "reloader | ", &log)
	testutil.Must(t, err)
	defer stop()

	const ns = "e2e"
	testutil.Must(t, cluster.EnsureNamespace(ctx, cl, ns))
	annotated := map[string]string{"reloader.stakater.com/auto": "true"}
	spec := func() corev1.PodSpec {
		return corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "app", Image: "busybox",
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
		}}}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}, Data: map[string]string{"k": "v1"}}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "migrate", Annotations: annotated},
		Spec:       batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: spec()}},
	}
	cron := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly", Annotations: annotated},
		Spec: batchv1.CronJobSpec{Schedule: "0 0 1 1 *", JobTemplate: batchv1.JobTemplateSpec{
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: spec()}},
		}},
	}
	dspec := spec()
	dspec.RestartPolicy = corev1.RestartPolicyAlways
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Annotations: map[string]string{
			"reloader.stakater.com/auto": "true", "deployment.reloader.stakater.com/pause-period": "5s"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: dspec},
		},
	}
	for _, o := range []client.Object{cm, job, cron, d} {
		testutil.Must(t, cl.Create(ctx, o))
	}
	for _, o := range []client.Object{job, cron, d} {
		testutil.Eventually(t, o.GetName()+" recorded", testutil.Cond(func() (bool, error) {
			if err := cl.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
				return false, err
			}
			return records.Recorded(ctx, cl, o)
		}))
	}
	oldJobUID := job.UID
	testutil.Eventually(t, "the Job's first pod", testutil.Cond(func() (bool, error) {
		n, err := podsOf(ctx, cl, ns, oldJobUID)
		return n > 0, err
	}))
	oldRS := replicaSets(t, ctx, cl, ns)

	cm.Data["k"] = "v2"
	testutil.Must(t, cl.Update(ctx, cm))
	testutil.Eventually(t, "Job replaced, its new pod running the new config", testutil.Cond(func() (bool, error) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if job.UID == oldJobUID || !hasReloadEnv(job.Spec.Template.Spec) {
			return false, nil
		}
		n, err := podsOf(ctx, cl, ns, job.UID)
		return n > 0, err
	}))
	testutil.Eventually(t, "the old Job's pod garbage-collected", testutil.Cond(func() (bool, error) {
		n, err := podsOf(ctx, cl, ns, oldJobUID)
		return n == 0, err
	}))
	testutil.Eventually(t, "CronJob template reloaded", testutil.Cond(func() (bool, error) {
		err := cl.Get(ctx, client.ObjectKeyFromObject(cron), cron)
		return err == nil && hasReloadEnv(cron.Spec.JobTemplate.Spec.Template.Spec), err
	}))
	testutil.Eventually(t, "Deployment paused with the new template", testutil.Cond(func() (bool, error) {
		err := cl.Get(ctx, client.ObjectKeyFromObject(d), d)
		return err == nil && d.Spec.Paused && hasReloadEnv(d.Spec.Template.Spec), err
	}))
	// The Deployment controller has seen the paused spec once it reports its generation
	// observed: a ReplicaSet for it would exist by then.
	paused := d.Generation
	testutil.Eventually(t, "the paused spec observed by the Deployment controller", testutil.Cond(func() (bool, error) {
		var now appsv1.Deployment
		err := cl.Get(ctx, client.ObjectKeyFromObject(d), &now)
		return err == nil && now.Status.ObservedGeneration >= paused, err
	}))
	if got := replicaSets(t, ctx, cl, ns); got != oldRS {
		t.Errorf("a paused Deployment rolled: ReplicaSets %d -> %d", oldRS, got)
	}
	testutil.Eventually(t, "resumed and rolled to a new ReplicaSet", testutil.Cond(func() (bool, error) {
		err := cl.Get(ctx, client.ObjectKeyFromObject(d), d)
		return err == nil && !d.Spec.Paused && replicaSets(t, ctx, cl, ns) == oldRS+1, err
	}))
	var jobs batchv1.JobList
	testutil.Must(t, cl.List(ctx, &jobs, client.InNamespace(ns)))
	if len(jobs.Items) != 1 {
		t.Errorf("%d Jobs in the namespace, want only the replaced one (the CronJob must not start one)", len(jobs.Items))
	}
}

// outputLoggedOnFailure collects the output of the test's processes and logs it if the test
// fails, once the processes are stopped.
func outputLoggedOnFailure(t *testing.T) *proc.Output {
	out := &proc.Output{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(out.String())
		}
	})
	return out
}

// startCluster starts a local control plane for the test and an admin client of it.
func startCluster(t *testing.T, ctx context.Context, opts testenv.Options) (*testenv.Cluster, client.Client) {
	t.Helper()
	cluster, err := testenv.Start(ctx, opts)
	testutil.Must(t, err)
	t.Cleanup(func() { _ = cluster.Stop() })
	cl, err := client.New(cluster.Config, client.Options{})
	testutil.Must(t, err)
	return cluster, cl
}

func podsOf(ctx context.Context, cl client.Client, ns string, jobUID any) (int, error) {
	var pods corev1.PodList
	err := cl.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{batchv1.ControllerUidLabel: fmt.Sprint(jobUID)})
	return len(pods.Items), err
}

func replicaSets(t *testing.T, ctx context.Context, cl client.Client, ns string) int {
	t.Helper()
	var list appsv1.ReplicaSetList
	testutil.Must(t, cl.List(ctx, &list, client.InNamespace(ns)))
	return len(list.Items)
}

func hasReloadEnv(spec corev1.PodSpec) bool {
	for _, e := range spec.Containers[0].Env {
		if e.Name == "STAKATER_CFG_CONFIGMAP" {
			return true
		}
	}
	return false
}
