package source

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestRefs(t *testing.T) {
	cmKey := func(name string) *corev1.ConfigMapKeySelector {
		return &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "k"}
	}
	secretKey := func(name string) *corev1.SecretKeySelector {
		return &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "k"}
	}
	tests := []struct {
		name string
		spec corev1.PodSpec
		want []Ref
	}{
		{
			name: "no references",
			spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}},
			want: []Ref{},
		},
		{
			name: "env valueFrom in two containers",
			spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "a", Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: cmKey("cfg")}}}},
				{Name: "b", Env: []corev1.EnvVar{
					{Name: "Y", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: cmKey("cfg")}},
					{Name: "Z", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: secretKey("db")}},
					{Name: "PLAIN", Value: "v"},
				}},
			}},
			want: []Ref{
				{ID: ID{ConfigMap, "cfg"}, Containers: []string{"a", "b"}},
				{ID: ID{Secret, "db"}, Containers: []string{"b"}},
			},
		},
		{
			name: "envFrom",
			spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", EnvFrom: []corev1.EnvFromSource{
				{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}},
				{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}}},
			}}}},
			want: []Ref{
				{ID: ID{ConfigMap, "cfg"}, Containers: []string{"a"}},
				{ID: ID{Secret, "sec"}, Containers: []string{"a"}},
			},
		},
		{
			name: "volumes, projected and csi; mounted by one container, one volume unmounted",
			spec: corev1.PodSpec{
				Volumes: []corev1.Volume{
					{Name: "v1", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
					{Name: "v2", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls"}}},
					{Name: "v3", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
						{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "p-cfg"}}},
						{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "p-sec"}}},
					}}}},
					{Name: "v4", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "secrets-store.csi.k8s.io", VolumeAttributes: map[string]string{"secretProviderClass": "vault"}}}},
				},
				Containers: []corev1.Container{
					{Name: "app", VolumeMounts: []corev1.VolumeMount{{Name: "v1"}, {Name: "v3"}, {Name: "v4"}}},
					{Name: "side"},
				},
			},
			want: []Ref{
				{ID: ID{ConfigMap, "cfg"}, Containers: []string{"app"}},
				{ID: ID{ConfigMap, "p-cfg"}, Containers: []string{"app"}},
				{ID: ID{Secret, "p-sec"}, Containers: []string{"app"}},
				{ID: ID{Secret, "tls"}},
				{ID: ID{SecretProviderClass, "vault"}, Containers: []string{"app"}},
			},
		},
		{
			name: "init container only",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "init", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "boot"}}}}}},
				Containers:     []corev1.Container{{Name: "app"}},
			},
			want: []Ref{{ID: ID{ConfigMap, "boot"}, InitContainers: []string{"init"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Refs(&tt.spec)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Refs() =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestParseID(t *testing.T) {
	for _, id := range []ID{{ConfigMap, "a"}, {Secret, "b.c"}, {SecretProviderClass, "x"}} {
		got, ok := ParseID(id.String())
		if !ok || got != id {
			t.Errorf("ParseID(%q) = %v, %v", id.String(), got, ok)
		}
	}
	for _, bad := range []string{"", "configmap", "configmap/", "pod/x"} {
		if _, ok := ParseID(bad); ok {
			t.Errorf("ParseID(%q) accepted", bad)
		}
	}
}

func TestKindTitle(t *testing.T) {
	want := map[Kind]string{ConfigMap: "ConfigMap", Secret: "Secret", SecretProviderClass: "SecretProviderClass"}
	for _, k := range Kinds {
		if got := k.Title(); got != want[k] {
			t.Errorf("%s.Title() = %q, want %q", k, got, want[k])
		}
	}
}
