package loadtest

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func setData(o client.Object, d map[string]string) {
	switch o := o.(type) {
	case *corev1.ConfigMap:
		o.Data = d
	case *corev1.Secret:
		o.Data = nil
		o.StringData = d
	}
}
