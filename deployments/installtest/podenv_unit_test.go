package installtest

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/reloader-operator/reloader/internal/testutil"
)

func TestContainerEnvAsTheKubeletResolvesIt(t *testing.T) {
	pod := fakePod{Name: "reloader-0", Namespace: "ops", NodeName: "node-1", ServiceAccount: "reloader",
		Labels:      map[string]string{"app": "reloader"},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")}}
	c := corev1.Container{
		Name: "reloader",
		Resources: corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
		},
		Env: []corev1.EnvVar{
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
			{Name: "APP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
			{Name: "GOMAXPROCS", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: resource.MustParse("1")}}},
			{Name: "GOMEMLIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}}},
			{Name: "MEM_MI", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "requests.memory", Divisor: resource.MustParse("1Mi")}}},
			{Name: "CPU_REQ_M", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "requests.cpu", Divisor: resource.MustParse("1m")}}},
			{Name: "ID", Value: "$(POD_NAMESPACE)/$(POD_NAME) $(LATER) $$(POD_NAME)"},
			{Name: "LATER", Value: "x"},
		},
		Args: []string{"--namespaces=$(POD_NAMESPACE)", "--id=$(ID)"},
	}
	env, err := containerEnv(c, pod)
	testutil.Must(t, err)
	want := []string{"POD_NAME=reloader-0", "POD_NAMESPACE=ops", "APP=reloader", "GOMAXPROCS=2",
		"GOMEMLIMIT=536870912", "MEM_MI=128", "CPU_REQ_M=1500", "ID=ops/reloader-0 $(LATER) $(POD_NAME)", "LATER=x"}
	if !slices.Equal(env, want) {
		t.Errorf("env\n got %q\nwant %q", env, want)
	}
	if args := containerArgs(c, env); !slices.Equal(args, []string{"--namespaces=ops", "--id=ops/reloader-0 $(LATER) $(POD_NAME)"}) {
		t.Errorf("args %q", args)
	}

	// No limit: the node's allocatable, as the kubelet does.
	c.Resources.Limits = nil
	env, err = containerEnv(corev1.Container{Env: c.Env[3:5]}, pod)
	testutil.Must(t, err)
	if want := []string{"GOMAXPROCS=4", "GOMEMLIMIT=8589934592"}; !slices.Equal(env, want) {
		t.Errorf("without limits got %q, want %q", env, want)
	}

	for _, bad := range []corev1.EnvVar{
		{Name: "X", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.containers"}}},
		{Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}},
		{Name: "X", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "cpu"}}},
	} {
		if _, err := containerEnv(corev1.Container{Env: []corev1.EnvVar{bad}}, pod); err == nil {
			t.Errorf("%+v resolved without error", bad.ValueFrom)
		}
	}
}
