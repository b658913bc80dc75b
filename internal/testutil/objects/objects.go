// Package objects builds the Kubernetes objects tests create, in one signature style:
// namespace and name first, then what the object holds. Callers change the returned object
// for anything rarer (replicas, a second container, a paused spec).
package objects

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Auto is the annotation that has reloader roll a workload on any source it uses.
var Auto = map[string]string{"reloader.stakater.com/auto": "true"}

// ConfigMap is a ConfigMap holding data.
func ConfigMap(ns, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

// Secret is a Secret holding data.
func Secret(ns, name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// PodSpec has one container, "app" (busybox), reading every key of each ConfigMap named
// through envFrom.
func PodSpec(configMaps ...string) corev1.PodSpec {
	app := corev1.Container{Name: "app", Image: "busybox"}
	for _, cm := range configMaps {
		app.EnvFrom = append(app.EnvFrom, corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: cm}}})
	}
	return corev1.PodSpec{Containers: []corev1.Container{app}}
}

// Template is a pod template labelled app=<app> around spec.
func Template(app string, spec corev1.PodSpec) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}}, Spec: spec}
}

// Deployment runs tpl, selecting its pods by the template's labels.
func Deployment(ns, name string, annotations map[string]string, tpl corev1.PodTemplateSpec) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: clone(annotations)},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: clone(tpl.Labels)},
			Template: tpl,
		},
	}
}

// AutoDeployment is a Deployment named name, its pods labelled app=<name>, that reads
// ConfigMap cm and reloads on it (the auto annotation).
func AutoDeployment(ns, name, cm string) *appsv1.Deployment {
	return Deployment(ns, name, Auto, Template(name, PodSpec(cm)))
}

func clone(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
