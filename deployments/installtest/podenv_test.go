package installtest

import (
	"fmt"
	"math"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// fakePod is what the kubelet knows about the pod a container runs in, for the env vars the
// chart takes from the downward API.
type fakePod struct {
	Name, Namespace, UID, NodeName, ServiceAccount, IP string
	Labels, Annotations                                map[string]string
	// Allocatable is the node's: the kubelet's value for a limit the container does not set.
	Allocatable corev1.ResourceList
}

// containerEnv resolves a container's env as the kubelet would, in order ("NAME=value"):
// literal values with $(VAR) expanded, fieldRef from the pod, resourceFieldRef from the
// container's resources. Sources the proof does not need (ConfigMap and Secret keys, envFrom)
// are errors, so that a chart using them fails loudly here instead of running with less.
func containerEnv(c corev1.Container, pod fakePod) ([]string, error) {
	if len(c.EnvFrom) > 0 {
		return nil, fmt.Errorf("container %s: envFrom is not resolved by this test", c.Name)
	}
	vars := map[string]string{}
	var out []string
	for _, e := range c.Env {
		var v string
		switch {
		case e.ValueFrom == nil:
			v = expand(e.Value, vars)
		case e.ValueFrom.FieldRef != nil:
			var err error
			if v, err = podField(e.ValueFrom.FieldRef.FieldPath, pod); err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
		case e.ValueFrom.ResourceFieldRef != nil:
			var err error
			if v, err = resourceField(*e.ValueFrom.ResourceFieldRef, c, pod.Allocatable); err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
		default:
			return nil, fmt.Errorf("env %s: valueFrom %v is not resolved by this test", e.Name, e.ValueFrom)
		}
		vars[e.Name] = v
		out = append(out, e.Name+"="+v)
	}
	return out, nil
}

// containerArgs is the container's argv after the entrypoint: command[1:] (the image's
// entrypoint being the binary) then args, each with $(VAR) expanded from env.
func containerArgs(c corev1.Container, env []string) []string {
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	var argv []string
	if len(c.Command) > 1 {
		argv = append(argv, c.Command[1:]...)
	}
	argv = append(argv, c.Args...)
	for i, a := range argv {
		argv[i] = expand(a, vars)
	}
	return argv
}

var varRef = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)`)

// expand replaces $(VAR) by the value of a variable defined before, leaves unknown
// references as written and turns $$ into $, as the kubelet does.
func expand(s string, vars map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		if v, ok := vars[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

var labelPath = regexp.MustCompile(`^metadata\.(labels|annotations)\['([^']+)'\]$`)

func podField(path string, pod fakePod) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return pod.UID, nil
	case "spec.nodeName":
		return pod.NodeName, nil
	case "spec.serviceAccountName":
		return pod.ServiceAccount, nil
	case "status.podIP", "status.podIPs", "status.hostIP", "status.hostIPs":
		return pod.IP, nil
	}
	if m := labelPath.FindStringSubmatch(path); m != nil {
		if m[1] == "labels" {
			return pod.Labels[m[2]], nil
		}
		return pod.Annotations[m[2]], nil
	}
	return "", fmt.Errorf("fieldRef %q is not a downward API field", path)
}

// resourceField is the kubelet's rounding: the quantity divided by the divisor, rounded up;
// a limit the container does not set is the node's allocatable.
func resourceField(ref corev1.ResourceFieldSelector, c corev1.Container, allocatable corev1.ResourceList) (string, error) {
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("resourceFieldRef %q is not limits.* or requests.*", ref.Resource)
	}
	list := c.Resources.Limits
	if kind == "requests" {
		list = c.Resources.Requests
	}
	q, set := list[corev1.ResourceName(name)]
	if !set && kind == "requests" { // the API server defaults an unset request to the limit
		q, set = c.Resources.Limits[corev1.ResourceName(name)]
	}
	if !set && kind == "limits" {
		q, set = allocatable[corev1.ResourceName(name)]
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if !set {
		return "0", nil
	}
	if name == string(corev1.ResourceCPU) {
		return fmt.Sprint(int64(math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue())))), nil
	}
	return fmt.Sprint(int64(math.Ceil(float64(q.Value()) / float64(divisor.Value())))), nil
}
