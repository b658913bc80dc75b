package workload_test

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/workload"
)

// replicaSet is a kind of this test only, written as a new kind's file would be: its adapter,
// and its description. Nothing else names it; kinds_onefile_test.go finds it in the flags,
// the RBAC rules, the names `reloader explain` accepts and the kinds the manager watches.
type replicaSet struct{}

func (replicaSet) Name() string { return "ReplicaSet" }
func (replicaSet) Describe() workload.Description {
	return workload.Description{Resource: appsv1.SchemeGroupVersion.WithResource("replicasets"), Short: []string{"rs"}}
}
func (replicaSet) NewObject() client.Object   { return &appsv1.ReplicaSet{} }
func (replicaSet) NewList() client.ObjectList { return &appsv1.ReplicaSetList{} }
func (replicaSet) PodTemplate(obj client.Object) *corev1.PodTemplateSpec {
	return &obj.(*appsv1.ReplicaSet).Spec.Template
}
func (replicaSet) PatchFrom(original client.Object) client.Patch {
	return client.StrategicMergeFrom(original)
}
