package workload

import (
	"encoding/json"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/cachemem/intern"
	"github.com/reloader-operator/reloader/internal/extapi"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// appliedDeployment is a Deployment as `kubectl apply` leaves it and its controller reports
// it: a last-applied copy, managed fields of three writers, a status with two conditions.
func appliedDeployment() []byte {
	d := &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "0b5e8a2c-4f0e-4c55-9d7e-2f3b1c0d9e11", ResourceVersion: "81234",
			Generation: 3, Labels: map[string]string{"app": "web", "team": "shop"},
			Annotations: map[string]string{"reloader.stakater.com/auto": "true", "deployment.kubernetes.io/revision": "3"}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{
					{Name: "app", Image: "registry.example.com/shop/web:1.42.0", Ports: []corev1.ContainerPort{{ContainerPort: 8080, Name: "http"}},
						EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}}}},
						Env: []corev1.EnvVar{{Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
							LocalObjectReference: corev1.LocalObjectReference{Name: "web-db"}, Key: "password"}}}},
						VolumeMounts: []corev1.VolumeMount{{Name: "certs", MountPath: "/etc/certs"}}},
					{Name: "sidecar", Image: "registry.example.com/proxy:2.1"},
				},
					Volumes: []corev1.Volume{{Name: "certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "web-certs"}}}}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability."},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", Message: `ReplicaSet "web-7c9d8f6b5d" has successfully progressed.`}}},
	}
	applied, _ := json.Marshal(struct {
		metav1.TypeMeta
		Metadata metav1.ObjectMeta     `json:"metadata"`
		Spec     appsv1.DeploymentSpec `json:"spec"`
	}{d.TypeMeta, metav1.ObjectMeta{Name: d.Name, Namespace: d.Namespace, Labels: d.Labels, Annotations: map[string]string{"reloader.stakater.com/auto": "true"}}, d.Spec})
	d.Annotations[LastAppliedAnnotation] = string(applied)
	for _, m := range []string{"kubectl-client-side-apply", "kube-controller-manager", "reloader"} {
		// Managed fields list every field a writer set; the spec's JSON is of that size.
		d.ManagedFields = append(d.ManagedFields, metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: "apps/v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: applied}})
	}
	b, _ := json.Marshal(d)
	return b
}

func decode[T any](t testing.TB, b []byte) *T {
	t.Helper()
	v := new(T)
	testutil.Must(t, json.Unmarshal(b, v))
	return v
}

// tables are the interning tables of these tests, as a manager's are of its cache.
var tables = intern.New()

func transform(t testing.TB, kind Kind, followed func(client.Object) bool, obj client.Object) client.Object {
	t.Helper()
	out, err := SlimTransform(kind, followed, false, tables)(obj)
	testutil.Must(t, err)
	return out.(client.Object)
}

// A cached Deployment keeps what decisions read (metadata, annotations, the template's
// references, replicas) and drops managed fields, kubectl's last-applied copy, the selector,
// what containers run and, once its controller has observed the generation and no rollout is
// followed, the status.
func TestSlimDeploymentKeepsWhatDecisionsRead(t *testing.T) {
	full := decode[appsv1.Deployment](t, appliedDeployment())
	got := transform(t, Deployment(), nil, decode[appsv1.Deployment](t, appliedDeployment())).(*appsv1.Deployment)

	if got.ManagedFields != nil || got.Annotations[LastAppliedAnnotation] != "" {
		t.Errorf("managed fields or last-applied kept: %d entries, %d bytes", len(got.ManagedFields), len(got.Annotations[LastAppliedAnnotation]))
	}
	if !StatusDropped(got) {
		t.Errorf("status kept: %+v", got.Status)
	}
	want := full.DeepCopy()
	want.SelfLink, want.ManagedFields, want.Status = slimMark, nil, appsv1.DeploymentStatus{ObservedGeneration: dropped}
	delete(want.Annotations, LastAppliedAnnotation)
	want.Spec.Selector, want.Spec.Template.Labels = nil, nil
	app, sidecar := &want.Spec.Template.Spec.Containers[0], &want.Spec.Template.Spec.Containers[1]
	app.Image, app.Ports, app.VolumeMounts[0].MountPath, sidecar.Image = "", nil, "", ""
	if got, _ := json.Marshal(got); string(got) != string(must(json.Marshal(want))) {
		t.Errorf("slim Deployment differs beyond the dropped parts:\n got %s\nwant %s", got, must(json.Marshal(want)))
	}
	if StatusDropped(full) {
		t.Error("a full status reads as dropped")
	}
	if StatusDropped(&appsv1.Deployment{}) {
		t.Error("an empty status (no controller has seen the workload) reads as dropped")
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// The status stays where the rollout follower reads it: while the kind's controller has
// not observed the generation, while the rollout is followed, for Argo Rollouts' string
// observedGeneration, and always for kinds without a rollout (a Job is re-created from its
// cached copy, annotations included).
func TestSlimKeepsTheStatusTheFollowerReads(t *testing.T) {
	followed := func(client.Object) bool { return true }

	pending := decode[appsv1.Deployment](t, appliedDeployment())
	pending.Generation = 4
	if got := transform(t, Deployment(), nil, pending).(*appsv1.Deployment); got.Status.ObservedGeneration != 3 {
		t.Errorf("status of a generation not yet observed dropped: %+v", got.Status)
	}
	if got := transform(t, Deployment(), followed, decode[appsv1.Deployment](t, appliedDeployment())).(*appsv1.Deployment); len(got.Status.Conditions) != 2 {
		t.Errorf("status of a followed rollout dropped: %+v", got.Status)
	}

	rollout := func(observed string) *extapi.Rollout {
		return &extapi.Rollout{ObjectMeta: metav1.ObjectMeta{Name: "r", Generation: 2}, Status: extapi.RolloutStatus{ObservedGeneration: observed, Replicas: 2}}
	}
	if got := transform(t, Rollout(), nil, rollout("1")).(*extapi.Rollout); got.Status.Replicas != 2 {
		t.Errorf("Rollout status of generation 1 < 2 dropped: %+v", got.Status)
	}
	if got := transform(t, Rollout(), nil, rollout("2")).(*extapi.Rollout); !StatusDropped(got) {
		t.Errorf("Rollout status of an observed generation kept: %+v", got.Status)
	}

	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Generation: 1, Annotations: map[string]string{LastAppliedAnnotation: "{}"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}, Status: batchv1.JobStatus{Succeeded: 1}}
	got := transform(t, Job(), nil, job).(*batchv1.Job)
	if got.Status.Succeeded != 1 || got.Annotations[LastAppliedAnnotation] == "" || got.ManagedFields != nil {
		t.Errorf("Job: want status and annotations kept, managed fields dropped: %+v", got)
	}
}

// The saving, as heap held per Deployment by 1,000 decoded Deployments, in full and slim.
func TestSlimDeploymentHeapPerObject(t *testing.T) {
	const n = 1000
	b := appliedDeployment()
	held := func(slim bool) uint64 {
		return testutil.RetainedBy(func() any {
			out := make([]client.Object, n)
			for i := range out {
				out[i] = decode[appsv1.Deployment](t, b)
				if slim {
					out[i] = transform(t, Deployment(), nil, out[i])
				}
			}
			return out
		}) / n
	}
	full, slim := held(false), held(true)
	t.Logf("heap held per Deployment: %d bytes in full (%d bytes of JSON), %d slim", full, len(b), slim)
	if full < uint64(len(b)) {
		t.Skipf("the heap measure is unreliable here: a full Deployment holds %d bytes", full)
	}
	if slim*10 > full*6 {
		t.Errorf("slim Deployment holds %d bytes, more than 60%% of %d in full", slim, full)
	}
}

// richTemplate is a pod template that uses most of what a pod spec can say, so that a field
// the slim copy drops would show in a patch made from it.
func richTemplate() corev1.PodTemplateSpec {
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz"}}, PeriodSeconds: 5}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"prometheus.io/scrape": "true"}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "migrate", Image: "migrate:1", Command: []string{"/migrate"},
				EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}}}}}},
			Containers: []corev1.Container{
				{Name: "app", Image: "web:1", Args: []string{"--port=8080"}, LivenessProbe: probe, ReadinessProbe: probe,
					Env: []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "$(A)-2"},
						{Name: "STAKATER_OLD_CONFIGMAP", Value: "abc"}},
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}},
					VolumeMounts: []corev1.VolumeMount{{Name: "certs", MountPath: "/etc/certs", ReadOnly: true},
						{Name: "certs", MountPath: "/etc/ca.pem", SubPath: "ca.pem"}}},
				{Name: "proxy", Image: "proxy:2", Ports: []corev1.ContainerPort{{ContainerPort: 15001}}},
			},
			Volumes:          []corev1.Volume{{Name: "certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "certs"}}}},
			Affinity:         &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}},
			Tolerations:      []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
			NodeSelector:     map[string]string{"pool": "apps"},
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry"}},
		},
	}
}

// The claim slimming rests on: for kinds written with strategic merge patches, a reload's
// patch made from slim copies is byte for byte the patch made from full ones, for each way a
// reload changes a template (an env var set, one removed, an annotation set) and for a pause.
func TestSlimCopiesMakeTheSamePatches(t *testing.T) {
	changes := map[string]func(*corev1.PodTemplateSpec){
		"env var set": func(tpl *corev1.PodTemplateSpec) {
			c := &tpl.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "STAKATER_WEB_CONFIG_CONFIGMAP", Value: "0123"})
		},
		"env var changed": func(tpl *corev1.PodTemplateSpec) { tpl.Spec.Containers[0].Env[2].Value = "def" },
		"env var removed": func(tpl *corev1.PodTemplateSpec) {
			tpl.Spec.Containers[0].Env = tpl.Spec.Containers[0].Env[:2]
		},
		"init container env set": func(tpl *corev1.PodTemplateSpec) {
			c := &tpl.Spec.InitContainers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "STAKATER_DB_SECRET", Value: "0123"})
		},
		"annotation set": func(tpl *corev1.PodTemplateSpec) {
			tpl.Annotations["reloader.stakater.com/last-reloaded-from"] = `{"type":"CONFIGMAP"}`
		},
	}
	for _, kind := range []Kind{Deployment(), StatefulSet(), DaemonSet()} {
		full := kind.NewObject()
		full.SetName("web")
		full.SetGeneration(2)
		full.SetAnnotations(map[string]string{"reloader.stakater.com/auto": "true"})
		*kind.PodTemplate(full) = richTemplate()
		for name, change := range changes {
			t.Run(kind.Name()+"/"+name, func(t *testing.T) {
				patch := func(orig client.Object) string {
					changed := orig.DeepCopyObject().(client.Object)
					change(kind.PodTemplate(changed))
					changed.SetAnnotations(map[string]string{"reloader.stakater.com/auto": "true", "reloader.dev/record": "{}"})
					if p, ok := kind.(Pausable); ok {
						p.SetPaused(changed, true)
					}
					data, err := kind.PatchFrom(orig).Data(changed)
					testutil.Must(t, err)
					return string(data)
				}
				slim := transform(t, kind, nil, full.DeepCopyObject().(client.Object))
				if kind.PodTemplate(slim).Spec.Containers[0].Image != "" {
					t.Fatal("the template was not slimmed")
				}
				if got, want := patch(slim), patch(full); got != want {
					t.Errorf("patch from the slim copy:\n%s\nfrom the full one:\n%s", got, want)
				}
			})
		}
	}
}

// Kinds written with merge patches (CRDs, aggregated APIs) keep their template whole: a
// merge patch replaces lists, and would write slimmed containers back.
func TestMergePatchedKindsKeepTheirTemplate(t *testing.T) {
	r := &extapi.Rollout{ObjectMeta: metav1.ObjectMeta{Name: "r", Generation: 1}, Spec: extapi.RolloutSpec{Template: richTemplate()}}
	got := transform(t, Rollout(), nil, r).(*extapi.Rollout)
	if want := richTemplate(); !equality.Semantic.DeepEqual(got.Spec.Template, want) {
		t.Errorf("the Rollout's template was changed: %+v", got.Spec.Template.Spec.Containers)
	}
}

// TestDropLabels: without ReloaderConfigs the labels of the kinds with a rollout go; a Job's
// stay, since a replacement Job is made from its cached copy.
func TestDropLabels(t *testing.T) {
	labels := func() map[string]string { return map[string]string{"team": "a"} }
	for _, drop := range []bool{false, true} {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Labels: labels()}}
		out, err := SlimTransform(Deployment(), nil, drop, tables)(d)
		testutil.Must(t, err)
		if got := out.(client.Object).GetLabels(); (got == nil) != drop {
			t.Errorf("Deployment, dropLabels %v: labels %v", drop, got)
		}
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Labels: labels()}}
		out, err = SlimTransform(Job(), nil, drop, tables)(j)
		testutil.Must(t, err)
		if got := out.(client.Object).GetLabels(); got["team"] != "a" {
			t.Errorf("Job, dropLabels %v: labels %v", drop, got)
		}
	}
}
