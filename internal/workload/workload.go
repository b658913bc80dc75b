// Package workload adapts each kind of workload to the one generic reconciler: how to make
// an empty object and list, and where its pod template lives. Adding a kind is one small file
// and one line in Builtin.
package workload

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kind is one kind of workload.
type Kind interface {
	// Name is the kind's name as users read it, e.g. "Deployment".
	Name() string
	NewObject() client.Object
	NewList() client.ObjectList
	// PodTemplate returns the object's pod template; changing it changes the object.
	PodTemplate(obj client.Object) *corev1.PodTemplateSpec
}

// Builtin returns the kinds every cluster has, in a stable order.
func Builtin() []Kind {
	return []Kind{Deployment(), StatefulSet(), DaemonSet()}
}

// typed implements Kind for a Go type T with list type L.
type typed[T, L any, PT interface {
	*T
	client.Object
}, PL interface {
	*L
	client.ObjectList
}] struct {
	name     string
	template func(PT) *corev1.PodTemplateSpec
}

func newTyped[T, L any, PT interface {
	*T
	client.Object
}, PL interface {
	*L
	client.ObjectList
}](name string, template func(PT) *corev1.PodTemplateSpec) Kind {
	return typed[T, L, PT, PL]{name: name, template: template}
}

func (k typed[T, L, PT, PL]) Name() string               { return k.name }
func (k typed[T, L, PT, PL]) NewObject() client.Object   { return PT(new(T)) }
func (k typed[T, L, PT, PL]) NewList() client.ObjectList { return PL(new(L)) }
func (k typed[T, L, PT, PL]) PodTemplate(obj client.Object) *corev1.PodTemplateSpec {
	return k.template(obj.(PT))
}
