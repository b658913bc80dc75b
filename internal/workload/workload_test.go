package workload

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestPodTemplateIsTheObjects(t *testing.T) {
	for _, k := range Builtin() {
		obj := k.NewObject()
		k.PodTemplate(obj).Spec.Containers = []corev1.Container{{Name: "app"}}
		if got := k.PodTemplate(obj).Spec.Containers; len(got) != 1 {
			t.Errorf("%s: PodTemplate does not point into the object", k.Name())
		}
		if k.NewList() == nil {
			t.Errorf("%s: NewList returned nil", k.Name())
		}
	}
}
