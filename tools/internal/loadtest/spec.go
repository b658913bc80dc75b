// Package loadtest runs reloader-compatible binaries through scenarios against a real control
// plane and judges them from outside: a watcher sees every pod-template change, the API
// server's audit log counts each side's requests, /proc gives CPU and memory.
package loadtest

import (
	"fmt"
	"maps"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/api/v1alpha1"
)

// Kinds of sources and workloads the scenarios use.
const (
	ConfigMap   = "ConfigMap"
	Secret      = "Secret"
	Deployment  = "Deployment"
	StatefulSet = "StatefulSet"
	DaemonSet   = "DaemonSet"
	CronJob     = "CronJob"
	Job         = "Job"
)

// How a workload uses a source.
const (
	EnvFrom   = "envFrom"
	EnvValue  = "valueFrom"
	Volume    = "volume"
	Projected = "projected"
	Init      = "init" // envFrom on an init container
)

// Source is a ConfigMap or Secret of a scenario.
type Source struct {
	Kind      string
	Namespace string
	Name      string
	// Size is the bytes of data it holds.
	Size int
	// Annotations are set on it at creation (a per-source setting of one build; another
	// build ignores them).
	Annotations map[string]string
}

// Key names the source in results.
func (s Source) Key() string { return s.Kind + "/" + s.Namespace + "/" + s.Name }

// Ref is one use of a source by a workload.
type Ref struct {
	Source Source
	How    string
}

// Workload is a workload of a scenario; every one carries reloader.stakater.com/auto unless
// it is Plain (a ReloaderConfig chooses it).
type Workload struct {
	Kind      string
	Namespace string
	Name      string
	Refs      []Ref
	// Annotations are added to the auto annotation.
	Annotations map[string]string
	// Plain workloads carry no auto annotation.
	Plain bool
	// Labels are added to the workload's own labels.
	Labels map[string]string
	// Replicas of Deployments and StatefulSets; nil means 1.
	Replicas *int32
	// ProgressDeadline is a Deployment's progressDeadlineSeconds; nil leaves the default
	// (600 s). A short one makes a rollout whose pods can't start stall within the scenario.
	ProgressDeadline *int32
}

// Key names the workload in results.
func (w Workload) Key() string { return w.Kind + "/" + w.Namespace + "/" + w.Name }

// TemplatePath is where the workload's pod template lives.
func TemplatePath(kind string) []string {
	if kind == CronJob {
		return []string{"spec", "jobTemplate", "spec", "template"}
	}
	return []string{"spec", "template"}
}

// data fills size bytes over keys of at most 4 KiB, changed by version.
func data(size int, version int) map[string]string {
	out := map[string]string{"version": fmt.Sprint(version)}
	for i := 0; size > 0; i++ {
		n := min(size, 4096)
		out[fmt.Sprintf("blob-%d", i)] = strings.Repeat(string(rune('a'+(version+i)%26)), n)
		size -= n
	}
	return out
}

// sourceObject builds the source at a content version.
func sourceObject(s Source, version int) client.Object {
	meta := metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, Labels: map[string]string{"loadtest": "true"}, Annotations: maps.Clone(s.Annotations)}
	d := data(s.Size, version)
	if s.Kind == Secret {
		return &corev1.Secret{ObjectMeta: meta, StringData: d}
	}
	return &corev1.ConfigMap{ObjectMeta: meta, Data: d}
}

// podTemplate builds the pod template that uses refs.
func podTemplate(w Workload, restart corev1.RestartPolicy) corev1.PodTemplateSpec {
	app := corev1.Container{Name: "app", Image: "registry.invalid/app:1"}
	var inits []corev1.Container
	var volumes []corev1.Volume
	for i, r := range w.Refs {
		name := r.Source.Name
		isSecret := r.Source.Kind == Secret
		switch r.How {
		case EnvValue:
			env := corev1.EnvVar{Name: fmt.Sprintf("VALUE_%d", i), ValueFrom: &corev1.EnvVarSource{}}
			if isSecret {
				env.ValueFrom.SecretKeyRef = &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "version"}
			} else {
				env.ValueFrom.ConfigMapKeyRef = &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "version"}
			}
			app.Env = append(app.Env, env)
		case Volume:
			v := corev1.Volume{Name: fmt.Sprintf("v%d", i)}
			if isSecret {
				v.Secret = &corev1.SecretVolumeSource{SecretName: name}
			} else {
				v.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}
			}
			volumes = append(volumes, v)
			app.VolumeMounts = append(app.VolumeMounts, corev1.VolumeMount{Name: v.Name, MountPath: "/config/" + v.Name})
		case Projected:
			p := corev1.VolumeProjection{}
			if isSecret {
				p.Secret = &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: name}}
			} else {
				p.ConfigMap = &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: name}}
			}
			v := corev1.Volume{Name: fmt.Sprintf("p%d", i), VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{p}}}}
			volumes = append(volumes, v)
			app.VolumeMounts = append(app.VolumeMounts, corev1.VolumeMount{Name: v.Name, MountPath: "/projected/" + v.Name})
		default: // EnvFrom, Init
			ef := corev1.EnvFromSource{}
			if isSecret {
				ef.SecretRef = &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}
			} else {
				ef.ConfigMapRef = &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}
			}
			if r.How == Init {
				inits = append(inits, corev1.Container{Name: fmt.Sprintf("init-%d", i), Image: "registry.invalid/init:1", EnvFrom: []corev1.EnvFromSource{ef}})
			} else {
				app.EnvFrom = append(app.EnvFrom, ef)
			}
		}
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": w.Name}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{app}, InitContainers: inits, Volumes: volumes, RestartPolicy: restart,
			// kwok's fake nodes carry this taint.
			Tolerations: []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		},
	}
}

// workloadObject builds the workload.
func workloadObject(w Workload) client.Object {
	ann := map[string]string{"reloader.stakater.com/auto": "true"}
	if w.Plain {
		delete(ann, "reloader.stakater.com/auto")
	}
	maps.Copy(ann, w.Annotations)
	labels := map[string]string{"loadtest": "true"}
	maps.Copy(labels, w.Labels)
	meta := metav1.ObjectMeta{Namespace: w.Namespace, Name: w.Name, Annotations: ann, Labels: labels}
	replicas := w.Replicas
	if replicas == nil {
		replicas = ptr.To[int32](1)
	}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": w.Name}}
	switch w.Kind {
	case StatefulSet:
		return &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Replicas: replicas, Selector: selector,
			Template: podTemplate(w, corev1.RestartPolicyAlways)}}
	case DaemonSet:
		return &appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Selector: selector, Template: podTemplate(w, corev1.RestartPolicyAlways)}}
	case CronJob:
		// The Job template carries the load test's label, so that a Job made from the CronJob
		// (upstream's reload of a CronJob) is seen by the observer.
		return &batchv1.CronJob{ObjectMeta: meta, Spec: batchv1.CronJobSpec{Schedule: "0 0 1 1 *", JobTemplate: batchv1.JobTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"loadtest": "true"}},
			Spec:       batchv1.JobSpec{Template: podTemplate(w, corev1.RestartPolicyNever)}}}}
	case Job:
		return &batchv1.Job{ObjectMeta: meta, Spec: batchv1.JobSpec{Template: podTemplate(w, corev1.RestartPolicyNever),
			ActiveDeadlineSeconds: ptr.To[int64](3600)}}
	}
	return &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: replicas, Selector: selector,
		Template: podTemplate(w, corev1.RestartPolicyAlways), ProgressDeadlineSeconds: w.ProgressDeadline}}
}

// RuleConfig is a ReloaderConfig of a scenario: it targets the Deployments labelled group=Group
// and names one source.
type RuleConfig struct {
	Namespace, Name, Group string
	Source                 Source
}

func configObject(c RuleConfig) *v1alpha1.ReloaderConfig {
	return &v1alpha1.ReloaderConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name},
		Spec: v1alpha1.ReloaderConfigSpec{
			Targets: []v1alpha1.Target{{Kind: Deployment, Selector: &v1alpha1.LabelSelector{MatchLabels: map[string]string{"group": c.Group}}}},
			Sources: []v1alpha1.Source{{Kind: c.Source.Kind, Name: c.Source.Name}},
		},
	}
}
