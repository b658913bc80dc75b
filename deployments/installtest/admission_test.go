package installtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/deployments/render"
	"github.com/reloader-operator/reloader/internal/extapi"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// The chart's admission policy, on a real API server: as reloader's ServiceAccount, every
// write a reload, a record or a pause makes passes, and any other change of a workload is
// refused; the same change by anyone else is not the policy's business.
func TestAdmissionPolicyLetsReloaderWriteOnlyItsOwnFields(t *testing.T) {
	needCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns, release = "vap", "vap"
	ensureNamespace(t, ctx, ns)
	objs, err := render.Chart(chartDir, map[string]any{"reloader": map[string]any{"admissionPolicy": map[string]any{"enabled": true},
		"isArgoRollouts": true, "reloadJobs": true, "custom_annotations": map[string]any{"pauseTime": "example.com/paused-at"}}}, release, ns)
	testutil.Must(t, err)
	if render.Find(objs, "ValidatingAdmissionPolicy", release+"-reloader-workload-writes") == nil {
		t.Fatal("no ValidatingAdmissionPolicy rendered")
	}
	testutil.Must(t, applyAll(ctx, objs, ns))
	t.Cleanup(func() {
		for _, kind := range []string{"ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy"} {
			for _, o := range render.OfKind(objs, kind) {
				_ = admin.Delete(context.Background(), o)
			}
		}
	})
	kubeconfig, err := serviceAccountKubeconfig(ctx, t.TempDir(), ns, release+"-reloader")
	testutil.Must(t, err)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	testutil.Must(t, err)
	cfg.QPS, cfg.Burst = 100, 200
	asReloader, err := client.New(cfg, client.Options{Scheme: admin.Scheme()})
	testutil.Must(t, err)

	// The policy takes effect once the API server has seen it: wait for a first refusal.
	probe := create(t, ctx, newWorkload(Deployment, ns))[0].(*appsv1.Deployment)
	t.Cleanup(func() { _ = admin.Delete(context.Background(), probe) })
	attempt := 0
	eventually(t, ctx, "the policy in force", func() error { return nil }, func() error {
		attempt++ // a new image each time: one that went through before the policy was seen is no change
		err := patchAs(ctx, asReloader, probe, func(o client.Object) {
			o.(*appsv1.Deployment).Spec.Template.Spec.Containers[0].Image = fmt.Sprintf("registry.example/evil:%d", attempt)
		})
		if err == nil || !strings.Contains(err.Error(), "STAKATER_") {
			return fmt.Errorf("image change: %v", err)
		}
		return nil
	})

	deployment := func(f func(*appsv1.Deployment)) func(client.Object) {
		return func(o client.Object) { f(o.(*appsv1.Deployment)) }
	}
	container := func(f func(*corev1.Container)) func(client.Object) {
		return deployment(func(d *appsv1.Deployment) { f(&d.Spec.Template.Spec.Containers[0]) })
	}
	annotate := func(key string) func(client.Object) {
		return func(o client.Object) {
			a := o.GetAnnotations()
			a[key] = "x"
			o.SetAnnotations(a)
		}
	}
	for _, tt := range []struct {
		name   string
		kind   string
		change func(client.Object)
		allow  bool
	}{
		// What reloader writes.
		{"env-vars reload", Deployment, container(func(c *corev1.Container) {
			c.Env = append(c.Env, corev1.EnvVar{Name: "STAKATER_APP_CONFIG_CONFIGMAP", Value: "abc"})
		}), true},
		{"annotations reload", Deployment, deployment(func(d *appsv1.Deployment) {
			d.Spec.Template.Annotations = map[string]string{"reloader.stakater.com/last-reloaded-from": `{"type":"CONFIGMAP"}`}
		}), true},
		{"record", Deployment, annotate("reloader.dev/source-hashes"), true},
		{"pause", Deployment, func(o client.Object) {
			o.(*appsv1.Deployment).Spec.Paused = true
			annotate("deployment.reloader.stakater.com/paused-at")(o)
			annotate("example.com/paused-at")(o) // renamed by custom_annotations
		}, true},
		{"CronJob reload", CronJob, func(o client.Object) {
			c := &o.(*batchv1.CronJob).Spec.JobTemplate.Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "STAKATER_APP_SECRET_SECRET", Value: "abc"})
		}, true},
		{"Job record", Job, annotate("reloader.dev/source-hashes"), true},
		{"Rollout restart", Rollout, func(o client.Object) { o.(*extapi.Rollout).Spec.RestartAt = &metav1.Time{Time: time.Now()} }, true},
		{"Rollout reload", Rollout, func(o client.Object) {
			c := &o.(*extapi.Rollout).Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "STAKATER_APP_CONFIG_CONFIGMAP", Value: "abc"})
		}, true},
		// What it must not.
		{"image", Deployment, container(func(c *corev1.Container) { c.Image = "registry.example/evil:1" }), false},
		{"command", Deployment, container(func(c *corev1.Container) { c.Command = []string{"/bin/sh"} }), false},
		{"other env", Deployment, container(func(c *corev1.Container) { c.Env = append(c.Env, corev1.EnvVar{Name: "LD_PRELOAD", Value: "/x"}) }), false},
		// The kubelet would put any Secret of the namespace into the pod's env.
		{"stakater env var from a Secret", Deployment, container(func(c *corev1.Container) {
			c.Env = append(c.Env, corev1.EnvVar{Name: "STAKATER_X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}})
		}), false},
		{"env from", Deployment, container(func(c *corev1.Container) { c.EnvFrom = nil }), false},
		{"volume mount", Deployment, container(func(c *corev1.Container) { c.VolumeMounts = nil }), false},
		{"privileged", Deployment, container(func(c *corev1.Container) {
			c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}), false},
		{"extra container", Deployment, deployment(func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: "miner", Image: "evil"})
		}), false},
		{"init container", Deployment, deployment(func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "miner", Image: "evil"}}
		}), false},
		{"service account", Deployment, deployment(func(d *appsv1.Deployment) { d.Spec.Template.Spec.ServiceAccountName = "admin" }), false},
		{"host network", Deployment, deployment(func(d *appsv1.Deployment) { d.Spec.Template.Spec.HostNetwork = true }), false},
		{"host path volume", Deployment, deployment(func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{Name: "host",
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		}), false},
		{"replicas", Deployment, deployment(func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](0) }), false},
		{"template labels", Deployment, deployment(func(d *appsv1.Deployment) { d.Spec.Template.Labels["extra"] = "x" }), false},
		{"template annotation of another owner", Deployment, deployment(func(d *appsv1.Deployment) {
			d.Spec.Template.Annotations = map[string]string{"kubectl.kubernetes.io/default-container": "x"}
		}), false},
		{"workload annotation of another owner", Deployment, annotate("example.com/owner"), false},
		{"workload label", Deployment, func(o client.Object) { o.SetLabels(map[string]string{"x": "y"}) }, false},
		{"CronJob image", CronJob, func(o client.Object) {
			o.(*batchv1.CronJob).Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image = "evil"
		}, false},
		{"CronJob schedule", CronJob, func(o client.Object) { o.(*batchv1.CronJob).Spec.Schedule = "* * * * *" }, false},
		{"CronJob job labels", CronJob, func(o client.Object) {
			o.(*batchv1.CronJob).Spec.JobTemplate.Labels = map[string]string{"x": "y"}
		}, false},
		{"Rollout image", Rollout, func(o client.Object) { o.(*extapi.Rollout).Spec.Template.Spec.Containers[0].Image = "evil" }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorkload(tt.kind, ns)
			w.SetName(strings.ReplaceAll(strings.ToLower(tt.name), " ", "-"))
			create(t, ctx, w)
			// Later cluster-wide installs would otherwise find it (namespaces are never
			// deleted here: no namespace controller runs).
			t.Cleanup(func() { _ = admin.Delete(context.Background(), w) })
			err := patchAs(ctx, asReloader, w, tt.change)
			if tt.allow && err != nil {
				t.Errorf("refused: %v", err)
			}
			// A rule that fails to evaluate refuses too (failurePolicy Fail): the refusal must
			// be a rule's verdict, with its message.
			if !tt.allow && (err == nil || !strings.Contains(err.Error(), "reloader may") || strings.Contains(err.Error(), "resulted in error")) {
				t.Errorf("not refused by the policy: %v", err)
			}
			if !tt.allow && testing.Verbose() {
				t.Log(err)
			}
			if !tt.allow {
				// Anyone else may: the policy binds reloader only.
				if err := patchAs(ctx, admin, w, tt.change); err != nil {
					t.Errorf("the admin is refused too: %v", err)
				}
			}
		})
	}

	// A STAKATER_ variable its owner reads from a Secret is the owner's: it stays, and
	// reloader's writes beside it pass.
	owned := newWorkload(Deployment, ns).(*appsv1.Deployment)
	owned.Name = "owners-stakater-env"
	owned.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "STAKATER_OWN", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}}}
	create(t, ctx, owned)
	t.Cleanup(func() { _ = admin.Delete(context.Background(), owned) })
	if err := patchAs(ctx, asReloader, owned, annotate("reloader.dev/source-hashes")); err != nil {
		t.Errorf("a record beside the owner's STAKATER_ variable from a Secret: %v", err)
	}

	checkCreates(t, ctx, ns, asReloader)
}

// checkCreates: as reloader's ServiceAccount, a Job is created only as a reload and a
// ControllerRevision only as a replacement record, changed only by its signature; anyone else
// is not the policy's business.
func checkCreates(t *testing.T, ctx context.Context, ns string, asReloader client.Client) {
	record := func(name string, labels, ann map[string]string) *appsv1.ControllerRevision {
		return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: ann},
			Data: runtime.RawExtension{Raw: []byte(`{"kind":"Job"}`)}, Revision: 1}
	}
	recordLabels := map[string]string{"reloader.dev/replacement-of": "Job"}
	recordAnn := func() map[string]string {
		return map[string]string{"reloader.dev/replaces-uid": "u", "reloader.dev/replaces-name": "j"}
	}
	job := func(name string, ann map[string]string) *batchv1.Job {
		j := newWorkload(Job, ns).(*batchv1.Job)
		j.Name, j.Annotations = name, ann
		return j
	}
	// The policy takes effect once the API server has seen it: wait for a first refusal.
	attempt := 0
	eventually(t, ctx, "the creates policy in force", func() error { return nil }, func() error {
		attempt++
		err := asReloader.Create(ctx, job(fmt.Sprintf("probe-%d", attempt), nil))
		if err == nil || !strings.Contains(err.Error(), "reloader may create a Job only") {
			return fmt.Errorf("a Job created with no record: %v", err)
		}
		return nil
	})
	for _, tt := range []struct {
		name  string
		obj   client.Object
		allow bool
	}{
		{"Job replacement", job("replacement", map[string]string{"reloader.dev/source-hashes": "{}"}), true},
		{"Job of no reload", job("no-reload", map[string]string{"app": "x"}), false},
		{"replacement record", record("rec-ok", recordLabels, recordAnn()), true},
		{"record of other labels", record("rec-labels", map[string]string{"reloader.dev/replacement-of": "Job", "x": "y"}, recordAnn()), false},
		{"record without its annotations", record("rec-ann", recordLabels, nil), false},
		{"revision of no record", record("rev", map[string]string{"app": "x"}, nil), false},
	} {
		t.Run("create "+tt.name, func(t *testing.T) {
			err := asReloader.Create(ctx, tt.obj)
			t.Cleanup(func() { _ = admin.Delete(context.Background(), tt.obj) })
			if tt.allow && err != nil {
				t.Errorf("refused: %v", err)
			}
			if !tt.allow && (err == nil || !strings.Contains(err.Error(), "reloader may") || strings.Contains(err.Error(), "resulted in error")) {
				t.Errorf("not refused by the policy: %v", err)
			}
		})
	}
	rec := record("rec-signed", recordLabels, recordAnn())
	testutil.Must(t, asReloader.Create(ctx, rec))
	t.Cleanup(func() { _ = admin.Delete(context.Background(), rec) })
	for _, tt := range []struct {
		name   string
		change func(*appsv1.ControllerRevision)
		allow  bool
	}{
		{"signature", func(r *appsv1.ControllerRevision) { r.Annotations["reloader.dev/record-mac"] = "00ff" }, true},
		// Its data the API server keeps immutable itself.
		{"revision", func(r *appsv1.ControllerRevision) { r.Revision = 2 }, false},
		{"replaced name", func(r *appsv1.ControllerRevision) { r.Annotations["reloader.dev/replaces-name"] = "other" }, false},
		{"labels", func(r *appsv1.ControllerRevision) { r.Labels["x"] = "y" }, false},
	} {
		t.Run("record "+tt.name, func(t *testing.T) {
			cur := &appsv1.ControllerRevision{}
			testutil.Must(t, admin.Get(ctx, client.ObjectKeyFromObject(rec), cur))
			before := cur.DeepCopy()
			tt.change(cur)
			err := asReloader.Patch(ctx, cur, client.MergeFrom(before))
			if tt.allow && err != nil {
				t.Errorf("refused: %v", err)
			}
			if !tt.allow && (err == nil || !strings.Contains(err.Error(), "reloader may change a replacement record only") || strings.Contains(err.Error(), "resulted in error")) {
				t.Errorf("not refused by the policy: %v", err)
			}
		})
	}
}

// patchAs reads obj afresh, changes it and patches it as c does: a strategic merge patch
// for built-in kinds, a merge patch for custom resources (internal/workload PatchFrom).
func patchAs(ctx context.Context, c client.Client, obj client.Object, change func(client.Object)) error {
	if err := admin.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return err
	}
	before := obj.DeepCopyObject().(client.Object)
	change(obj)
	patch := client.StrategicMergeFrom(before)
	if _, custom := obj.(*extapi.Rollout); custom {
		patch = client.MergeFrom(before)
	}
	return c.Patch(ctx, obj, patch)
}
