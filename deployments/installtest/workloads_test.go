package installtest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/extapi"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil/records"
)

// The workload kinds the proof creates. CSI is a Deployment whose only source is a
// SecretProviderClass mount, so that its reload can only come from the CSI integration.
const (
	Deployment  = "Deployment"
	DaemonSet   = "DaemonSet"
	StatefulSet = "StatefulSet"
	CronJob     = "CronJob"
	Job         = "Job"
	Rollout     = "Rollout"
	// DeploymentConfig is OpenShift's; reloader finds its API by discovery.
	DeploymentConfig = "DeploymentConfig"
	CSI              = "CSI"
)

// builtinKinds are watched by every install unless ignored.
var builtinKinds = []string{Deployment, DaemonSet, StatefulSet, CronJob, Job}

// The sources every workload uses: the ConfigMap through envFrom, the Secret as a volume.
const (
	configName = "app-config"
	secretName = "app-secret"
	spcName    = "vault"
)

// sources are the ConfigMap and Secret of namespace ns, and the CSI mount status of a pod of
// the CSI Deployment, at their first content.
func sources(ns string) []client.Object {
	return []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: configName}, Data: map[string]string{"greeting": "hello"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secretName}, StringData: map[string]string{"password": "one"}},
	}
}

// reloaderConfig is a ReloaderConfig of namespace ns choosing the Deployment and the key of
// the ConfigMap it uses: its status is written by the leader.
func reloaderConfig(ns string) *v1alpha1.ReloaderConfig {
	return &v1alpha1.ReloaderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "installtest"},
		Spec: v1alpha1.ReloaderConfigSpec{
			Targets: []v1alpha1.Target{{Kind: Deployment, Name: strings.ToLower(Deployment)}},
			Sources: []v1alpha1.Source{{Kind: "ConfigMap", Name: configName, Keys: []string{"greeting"}}},
		}}
}

func mountStatus(ns, version string) *extapi.SecretProviderClassPodStatus {
	return &extapi.SecretProviderClassPodStatus{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "csi-pod-" + ns + "-" + spcName},
		Status: extapi.SecretProviderClassPodStatusStatus{
			PodName: "csi-pod", SecretProviderClassName: spcName, Mounted: true,
			Objects: []extapi.SecretProviderClassObject{{ID: "secret/db-password", Version: version}},
		},
	}
}

// changeSources gives every source of ns new content: the change each workload must reload on.
func changeSources(ctx context.Context, ns string, csi bool) error {
	var cm corev1.ConfigMap
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: configName}, &cm); err != nil {
		return err
	}
	cm.Data["greeting"] = "changed"
	if err := admin.Update(ctx, &cm); err != nil {
		return err
	}
	var s corev1.Secret
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: secretName}, &s); err != nil {
		return err
	}
	s.StringData = map[string]string{"password": "two"}
	if err := admin.Update(ctx, &s); err != nil {
		return err
	}
	if !csi {
		return nil
	}
	st := mountStatus(ns, "")
	if err := admin.Get(ctx, client.ObjectKeyFromObject(st), st); err != nil {
		return err
	}
	st.Status.Objects[0].Version = "v2"
	return admin.Update(ctx, st)
}

// newWorkload builds a workload of kind in ns, annotated to reload on any source it uses.
func newWorkload(kind, ns string) client.Object {
	name := strings.ToLower(kind)
	meta := metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{"reloader.stakater.com/auto": "true"}}
	labels := map[string]string{"app": name}
	tpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1",
			EnvFrom:      []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: configName}}}},
			VolumeMounts: []corev1.VolumeMount{{Name: "secret", MountPath: "/etc/secret"}},
		}},
		Volumes: []corev1.Volume{{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secretName}}}},
	}}
	selector := &metav1.LabelSelector{MatchLabels: labels}
	switch kind {
	case Deployment:
		return &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Selector: selector, Template: tpl}}
	case CSI:
		tpl.Spec.Containers[0].EnvFrom = nil
		tpl.Spec.Volumes = []corev1.Volume{{Name: "secret", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
			Driver: "secrets-store.csi.k8s.io", VolumeAttributes: map[string]string{"secretProviderClass": spcName}}}}}
		return &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Selector: selector, Template: tpl}}
	case DaemonSet:
		return &appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Selector: selector, Template: tpl}}
	case StatefulSet:
		return &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Selector: selector, Template: tpl, ServiceName: name}}
	case CronJob:
		tpl.Spec.RestartPolicy = corev1.RestartPolicyNever
		return &batchv1.CronJob{ObjectMeta: meta, Spec: batchv1.CronJobSpec{Schedule: "0 3 1 1 *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tpl}}}}
	case Job:
		tpl.Spec.RestartPolicy = corev1.RestartPolicyNever
		return &batchv1.Job{ObjectMeta: meta, Spec: batchv1.JobSpec{Template: tpl}}
	case Rollout:
		return &extapi.Rollout{ObjectMeta: meta, Spec: extapi.RolloutSpec{Template: tpl}}
	case DeploymentConfig:
		return &extapi.DeploymentConfig{ObjectMeta: meta, Spec: extapi.DeploymentConfigSpec{Template: &tpl}}
	}
	panic("unknown kind " + kind)
}

// podTemplate is the template a reload writes to.
func podTemplate(obj client.Object) *corev1.PodTemplateSpec {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return &o.Spec.Template
	case *appsv1.DaemonSet:
		return &o.Spec.Template
	case *appsv1.StatefulSet:
		return &o.Spec.Template
	case *batchv1.CronJob:
		return &o.Spec.JobTemplate.Spec.Template
	case *batchv1.Job:
		return &o.Spec.Template
	case *extapi.Rollout:
		return &o.Spec.Template
	case *extapi.DeploymentConfig:
		return o.Spec.Template
	}
	panic(fmt.Sprintf("no pod template in %T", obj))
}

// state is what a reload changes: the pod template, and for a Job (whose template is
// immutable) the object's identity, since reloader replaces the Job.
func state(ctx context.Context, w client.Object) (string, error) {
	obj := w.DeepCopyObject().(client.Object)
	if err := admin.Get(ctx, client.ObjectKeyFromObject(w), obj); err != nil {
		return "", err
	}
	if _, ok := obj.(*batchv1.Job); ok {
		return string(obj.GetUID()), nil
	}
	b, err := json.Marshal(podTemplate(obj))
	return string(b), err
}

// recorded tells whether reloader has seen the workload: it writes the hashes of its sources,
// onto it or into its ledger of first records.
func recorded(ctx context.Context, w client.Object) (bool, error) {
	obj := w.DeepCopyObject().(client.Object)
	if err := admin.Get(ctx, client.ObjectKeyFromObject(w), obj); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return records.Recorded(ctx, admin, obj)
}

// reloadedBy checks that the workload's current template carries what the strategy writes:
// the annotation, or an env var per source.
func reloadedBy(ctx context.Context, w client.Object, strategy string) error {
	obj := w.DeepCopyObject().(client.Object)
	if err := admin.Get(ctx, client.ObjectKeyFromObject(w), obj); err != nil {
		return err
	}
	tpl := podTemplate(obj)
	if strategy == "annotations" {
		if tpl.Annotations[reload.LastReloadedFrom] == "" {
			return fmt.Errorf("no %s annotation on the pod template", reload.LastReloadedFrom)
		}
		for _, c := range tpl.Spec.Containers {
			for _, e := range c.Env {
				if strings.HasPrefix(e.Name, "STAKATER_") {
					return fmt.Errorf("the annotations strategy set env var %s", e.Name)
				}
			}
		}
		return nil
	}
	for _, c := range tpl.Spec.Containers {
		for _, e := range c.Env {
			if strings.HasPrefix(e.Name, "STAKATER_") {
				return nil
			}
		}
	}
	return fmt.Errorf("no STAKATER_* env var on the pod template")
}
