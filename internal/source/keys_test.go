package source

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestUsedKeys(t *testing.T) {
	local := func(name string) corev1.LocalObjectReference { return corev1.LocalObjectReference{Name: name} }
	cmKey := func(name, key string) corev1.EnvVar {
		return corev1.EnvVar{Name: key, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: local(name), Key: key}}}
	}
	secretKey := func(name, key string) corev1.EnvVar {
		return corev1.EnvVar{Name: key, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: local(name), Key: key}}}
	}
	items := func(keys ...string) []corev1.KeyToPath {
		var out []corev1.KeyToPath
		for _, k := range keys {
			out = append(out, corev1.KeyToPath{Key: k, Path: "p/" + k})
		}
		return out
	}
	cm := func(name string) ID { return ID{ConfigMap, name} }
	sec := func(name string) ID { return ID{Secret, name} }
	tests := []struct {
		name string
		spec corev1.PodSpec
		want map[ID]KeyUse
	}{
		{
			name: "nothing read",
			spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Env: []corev1.EnvVar{{Name: "X", Value: "1"}}}}},
			want: map[ID]KeyUse{},
		},
		{
			name: "valueFrom keys across containers and init containers, sorted and once",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "init", Env: []corev1.EnvVar{cmKey("cfg", "b")}}},
				Containers: []corev1.Container{
					{Name: "a", Env: []corev1.EnvVar{cmKey("cfg", "c"), cmKey("cfg", "a"), secretKey("db", "password")}},
					{Name: "b", Env: []corev1.EnvVar{cmKey("cfg", "a")}},
				},
			},
			want: map[ID]KeyUse{cm("cfg"): {Keys: []string{"a", "b", "c"}}, sec("db"): {Keys: []string{"password"}}},
		},
		{
			name: "envFrom reads the whole source, keys read besides are kept",
			spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name:    "a",
				Env:     []corev1.EnvVar{cmKey("cfg", "a")},
				EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: local("cfg")}}, {SecretRef: &corev1.SecretEnvSource{LocalObjectReference: local("db")}}},
			}}},
			want: map[ID]KeyUse{cm("cfg"): {Whole: true, Keys: []string{"a"}}, sec("db"): {Whole: true}},
		},
		{
			name: "volumes with items read those keys, without items every key",
			spec: corev1.PodSpec{Volumes: []corev1.Volume{
				{Name: "v1", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: local("cfg"), Items: items("x.yaml")}}},
				{Name: "v2", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls", Items: items("tls.crt", "tls.key")}}},
				{Name: "v3", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: local("all")}}},
				{Name: "v4", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "all-sec", Items: []corev1.KeyToPath{}}}},
			}},
			want: map[ID]KeyUse{
				cm("cfg"):      {Keys: []string{"x.yaml"}},
				sec("tls"):     {Keys: []string{"tls.crt", "tls.key"}},
				cm("all"):      {Whole: true},
				sec("all-sec"): {Whole: true},
			},
		},
		{
			name: "projected sources with and without items",
			spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: local("cfg"), Items: items("a")}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: local("db"), Items: items("user")}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: local("ca")}},
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
			}}}}}},
			want: map[ID]KeyUse{cm("cfg"): {Keys: []string{"a"}}, sec("db"): {Keys: []string{"user"}}, sec("ca"): {Whole: true}},
		},
		{
			name: "CSI volumes and unnamed references read no ConfigMap or Secret keys",
			spec: corev1.PodSpec{
				Volumes:    []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d", VolumeAttributes: map[string]string{"secretProviderClass": "vault"}}}}},
				Containers: []corev1.Container{{Name: "a", Env: []corev1.EnvVar{cmKey("", "k")}}},
			},
			want: map[ID]KeyUse{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := UsedKeys(&tt.spec); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("UsedKeys() =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}
