// Package scalebench measures reloader at scale on a local control plane: thousands of
// ConfigMaps, Secrets and Deployments, a burst of changes, the fan-out of one ConfigMap used
// by a thousand Deployments, and a soak of sustained churn. It prints figures (memory, API
// requests counted by the API server's audit log, latency); it judges nothing itself.
package scalebench

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SharedConfigMap is the ConfigMap every Deployment of the shared namespace uses.
const SharedConfigMap = "shared-config"

// namespace is one namespace of the layout and what it holds. Its Deployment k uses
// ConfigMaps 2k and 2k+1 and Secret k (modulo the counts), and SharedConfigMap when shared.
type namespace struct {
	name                             string
	deployments, configMaps, secrets int
	shared                           bool
}

// layout spreads the counts of cfg over namespaces: one namespace holds the Deployments of
// the shared ConfigMap, with their share of the sources; the rest is spread evenly.
func layout(cfg Config) []namespace {
	total := max(cfg.Deployments, 1)
	shared := min(cfg.Shared, cfg.Deployments)
	share := func(n int) int { return n * shared / total }
	out := []namespace{{name: "bench-shared", deployments: shared, configMaps: max(share(cfg.ConfigMaps), 1), secrets: max(share(cfg.Secrets), 1), shared: true}}
	d, c, s := cfg.Deployments-shared, cfg.ConfigMaps-out[0].configMaps, cfg.Secrets-out[0].secrets
	n := max(cfg.Namespaces, 1)
	for i := range n {
		part := func(total int) int { return total/n + btoi(i < total%n) }
		out = append(out, namespace{name: fmt.Sprintf("bench-%02d", i), deployments: part(d), configMaps: max(part(c), 1), secrets: max(part(s), 1)})
	}
	return out
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func configMapName(i int) string  { return fmt.Sprintf("cm-%05d", i) }
func secretName(i int) string     { return fmt.Sprintf("secret-%05d", i) }
func deploymentName(i int) string { return fmt.Sprintf("app-%05d", i) }

// regular is the number of ConfigMaps of ns other than SharedConfigMap.
func (ns namespace) regular() int { return max(ns.configMaps-btoi(ns.shared), 1) }

// configMapsOf names the ConfigMaps of Deployment k of ns.
func (ns namespace) configMapsOf(k int) []string {
	names := []string{configMapName(2 * k % ns.regular()), configMapName((2*k + 1) % ns.regular())}
	if ns.shared {
		names = append(names, SharedConfigMap)
	}
	return names
}

// users maps each source key (kind/namespace/name) to the Deployments (namespace/name) using it.
func users(nss []namespace) map[string][]string {
	out := map[string][]string{}
	for _, ns := range nss {
		for k := range ns.deployments {
			d := ns.name + "/" + deploymentName(k)
			for _, cm := range ns.configMapsOf(k) {
				key := "ConfigMap/" + ns.name + "/" + cm
				if len(out[key]) == 0 || out[key][len(out[key])-1] != d {
					out[key] = append(out[key], d)
				}
			}
			key := "Secret/" + ns.name + "/" + secretName(k%ns.secrets)
			out[key] = append(out[key], d)
		}
	}
	return out
}

// payload is size bytes of data under one key, different for each version.
func payload(size, version int) map[string]string {
	head := fmt.Sprintf("version=%d\n", version)
	return map[string]string{"config": head + strings.Repeat("x", max(size-len(head), 0))}
}

var labels = map[string]string{"loadtest": "true", "scalebench": "true"}

func configMap(ns, name string, size int) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Data: payload(size, 0)}
}

func secret(ns, name string, size int) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, StringData: payload(size, 0)}
}

// deployment is an auto-reloaded Deployment whose container takes its ConfigMaps as env and
// its Secret as a volume; no controller runs it (no pods are needed to count patches).
func deployment(ns namespace, k int) *appsv1.Deployment {
	name := deploymentName(k)
	c := corev1.Container{Name: "app", Image: "registry.example.com/app:1.0",
		VolumeMounts: []corev1.VolumeMount{{Name: "secret", MountPath: "/etc/secret"}}}
	for _, cm := range ns.configMapsOf(k) {
		c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}})
	}
	podLabels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.name, Name: name, Labels: labels, Annotations: map[string]string{"reloader.stakater.com/auto": "true"}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{c},
				Volumes: []corev1.Volume{{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: secretName(k % ns.secrets)}}}}}}},
	}
}

// objects returns every object of the layout: namespaces first, then sources, then
// Deployments, so that a Deployment never waits for its sources.
func objects(nss []namespace, size int) [][]client.Object {
	var spaces, sources, workloads []client.Object
	for _, ns := range nss {
		spaces = append(spaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.name}})
		if ns.shared {
			sources = append(sources, configMap(ns.name, SharedConfigMap, size))
		}
		for i := range ns.regular() {
			sources = append(sources, configMap(ns.name, configMapName(i), size))
		}
		for i := range ns.secrets {
			sources = append(sources, secret(ns.name, secretName(i), size))
		}
		for k := range ns.deployments {
			workloads = append(workloads, deployment(ns, k))
		}
	}
	return [][]client.Object{spaces, sources, workloads}
}
