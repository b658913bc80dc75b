package testutil

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ManagedConfigMap is a ConfigMap of keys keys as the API server sends it: with the
// managedFields of three writers, each owning every key.
func ManagedConfigMap(name string, keys int, value string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: map[string]string{}}
	var fields strings.Builder
	fields.WriteString(`{"f:data":{`)
	for i := range keys {
		k := fmt.Sprintf("key-%02d", i)
		cm.Data[k] = value
		if i > 0 {
			fields.WriteByte(',')
		}
		fmt.Fprintf(&fields, `"f:%s":{}`, k)
	}
	fields.WriteString(`}}`)
	at := metav1.NewTime(time.Date(2026, 11, 26, 21, 0, 0, 0, time.UTC))
	for i, m := range []string{"kubectl-client-side-apply", "helm", "kubectl-edit"} {
		t := metav1.NewTime(at.Add(time.Duration(i) * time.Minute))
		cm.ManagedFields = append(cm.ManagedFields, metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: "v1", Time: &t, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields.String())}})
	}
	return cm
}
