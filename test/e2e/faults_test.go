package e2e

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/localcluster"
	"github.com/reloader-operator/reloader/internal/proc"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
)

// reloader SIGKILLed between the delete and the create of a Job replacement: the API server
// refuses Job creates (a ValidatingAdmissionPolicy), so the process is certainly past the
// delete and not past the create when it dies. The next process finds the replacement
// written down and creates the Job once, with the new config; a Deployment using the same
// ConfigMap is rolled once, not again by the second process.
func TestKilledBetweenJobDeleteAndCreate(t *testing.T) {
	bin := buildReloader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, cl := startCluster(t, ctx, localcluster.Options{})
	var out lockedBuffer
	defer func() {
		if t.Failed() {
			t.Log(out.String())
		}
	}()
	const ns = "faults-job"
	if err := cluster.EnsureNamespace(ctx, cl, ns); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}, Data: map[string]string{"k": "v1"}}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "migrate", Annotations: map[string]string{"reloader.stakater.com/auto": "true"}},
		Spec:       batchv1.JobSpec{BackoffLimit: ptr.To[int32](3), Template: corev1.PodTemplateSpec{Spec: usingConfigMap("cfg", corev1.RestartPolicyNever)}},
	}
	d := deploymentUsing(ns, "web", "cfg")
	for _, o := range []client.Object{cm, job, d} {
		if err := cl.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	start := func(name string) *proc.Process {
		p, err := proc.Run(proc.Spec{Bin: bin, Kubeconfig: cluster.Kubeconfig, Prefix: name + " | ", Out: &out,
			Args: []string{"--metrics-addr=0", "--namespaces=" + ns}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Kill)
		return p
	}
	first := start("first")
	for _, o := range []client.Object{job, d} {
		waitRecorded(t, ctx, cl, o)
	}
	oldUID := job.UID
	jobs := watchCreations(t, ctx, cluster, &batchv1.JobList{}, ns)
	templates := watchTemplates(t, ctx, cluster.Config, ns)

	lift := denyCreates(t, ctx, cl, ns, "batch", "jobs", func() error {
		return cl.Create(ctx, &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "probe-"},
			Spec:       batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: usingConfigMap("none", corev1.RestartPolicyNever)}},
		})
	})
	cm.Data["k"] = "v2"
	if err := cl.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the old Job deleted and its re-create refused", func() (bool, error) {
		err := cl.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{})
		if !apierrors.IsNotFound(err) {
			return false, client.IgnoreNotFound(err)
		}
		return hasEvent(ctx, cl, ns, "migrate", controller.ReasonReloadFail)
	})
	first.Kill()
	t.Log("killed the first reloader between the delete and the create")
	var records appsv1.ControllerRevisionList
	if err := cl.List(ctx, &records, client.InNamespace(ns), client.HasLabels{controller.ReplacementLabel}); err != nil {
		t.Fatal(err)
	}
	if len(records.Items) != 1 {
		t.Fatalf("%d replacement records in the cluster after the kill, want 1", len(records.Items))
	}
	lift()
	start("second")

	want := hash.ConfigMap(cm)
	envName := reload.EnvVarName(source.ID{Kind: source.ConfigMap, Name: "cfg"})
	var created batchv1.Job
	waitFor(t, ctx, "the Job re-created by the second reloader with the new config", func() (bool, error) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(job), &created); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return created.UID != oldUID && envValue(created.Spec.Template.Spec, envName) == want, nil
	})
	waitFor(t, ctx, "the Deployment on the new config", func() (bool, error) {
		return templates.last("web", envName) == want, nil
	})
	waitFor(t, ctx, "the replacement record removed", func() (bool, error) {
		err := cl.List(ctx, &records, client.InNamespace(ns), client.HasLabels{controller.ReplacementLabel})
		return err == nil && len(records.Items) == 0, err
	})
	time.Sleep(2 * time.Second) // room for a late duplicate to show up

	if got, want := jobs.named("migrate"), []types.UID{oldUID, created.UID}; !slices.Equal(got, want) {
		t.Errorf("Jobs named migrate: %v, want the old one and exactly one replacement: %v", got, want)
	}
	if *created.Spec.BackoffLimit != 3 || created.Annotations[reload.RecordAnnotation] == "" {
		t.Errorf("the replacement lost the user's spec or the record: backoffLimit %d, annotations %v", *created.Spec.BackoffLimit, created.Annotations)
	}
	if v := templates.values("web", envName); len(v) != 1 {
		t.Errorf("Deployment web: %d template changes %v, want 1", len(v), v)
	}
}

// usingConfigMap is a pod spec reading all of ConfigMap name as env vars.
func usingConfigMap(name string, restart corev1.RestartPolicy) corev1.PodSpec {
	return corev1.PodSpec{RestartPolicy: restart, Containers: []corev1.Container{{Name: "app", Image: "busybox",
		EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}}}}
}

// deploymentUsing is an auto-reloaded Deployment whose pods read ConfigMap cm.
func deploymentUsing(ns, name, cm string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{"reloader.stakater.com/auto": "true"}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: usingConfigMap(cm, corev1.RestartPolicyAlways)},
		},
	}
}

func waitRecorded(t *testing.T, ctx context.Context, cl client.Client, o client.Object) {
	t.Helper()
	waitFor(t, ctx, o.GetName()+" recorded", func() (bool, error) {
		err := cl.Get(ctx, client.ObjectKeyFromObject(o), o)
		_, ok := o.GetAnnotations()[reload.RecordAnnotation]
		return ok, err
	})
}

func envValue(spec corev1.PodSpec, name string) string {
	for _, e := range spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func hasEvent(ctx context.Context, cl client.Client, ns, name, reason string) (bool, error) {
	var events eventsv1.EventList
	if err := cl.List(ctx, &events, client.InNamespace(ns)); err != nil {
		return false, err
	}
	for _, e := range events.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			return true, nil
		}
	}
	return false, nil
}

// denyCreates makes the API server refuse creates of one resource in ns, with a
// ValidatingAdmissionPolicy, until the returned func is called. Policies take effect
// asynchronously: each change is waited for with probe, an attempt to create one.
func denyCreates(t *testing.T, ctx context.Context, cl client.Client, ns, group, resource string, probe func() error) (lift func()) {
	t.Helper()
	name := "deny-" + resource + "-" + ns
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule:       admissionv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{resource}},
				},
			}}},
			Validations: []admissionv1.Validation{{Expression: "false", Message: "test: creates refused"}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns},
			}},
		},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := cl.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, ctx, "creates of "+resource+" refused", func() (bool, error) { return probe() != nil, nil })
	var once sync.Once
	lift = func() {
		once.Do(func() {
			_ = cl.Delete(ctx, binding)
			_ = cl.Delete(ctx, policy)
			waitFor(t, ctx, "creates of "+resource+" allowed again", func() (bool, error) { return probe() == nil, nil })
		})
	}
	t.Cleanup(func() { _ = cl.Delete(context.Background(), binding); _ = cl.Delete(context.Background(), policy) })
	return lift
}

// creations records the UIDs of the objects in a namespace, by name, in the order a watch
// sees them: those there when it starts, then each one created.
type creations struct {
	mu   sync.Mutex
	uids map[string][]types.UID
}

func (c *creations) named(name string) []types.UID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]types.UID(nil), c.uids[name]...)
}

func watchCreations(t *testing.T, ctx context.Context, cluster *localcluster.Cluster, list client.ObjectList, ns string) *creations {
	t.Helper()
	wc, err := client.NewWithWatch(cluster.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, list, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	c := &creations{uids: map[string][]types.UID{}}
	go func() {
		seen := map[types.UID]bool{}
		for ev := range w.ResultChan() {
			o, ok := ev.Object.(client.Object)
			if !ok || ev.Type != watch.Added {
				continue
			}
			if seen[o.GetUID()] {
				continue
			}
			seen[o.GetUID()] = true
			c.mu.Lock()
			c.uids[o.GetName()] = append(c.uids[o.GetName()], o.GetUID())
			c.mu.Unlock()
		}
	}()
	return c
}
