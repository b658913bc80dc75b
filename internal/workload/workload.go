// Package workload adapts each kind of workload to the one generic reconciler: how to make
// an empty object and list, where its pod template lives, and how a change is written; and
// describes it once (Description: its resource, the names users type, its gate), so that
// flags, RBAC, CLI names and the watch set derive from it. Adding a kind is one small file and
// one line in Known. Kinds that do more than change their pod template say so by implementing
// one of the small interfaces below.
package workload

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kind is one kind of workload.
type Kind interface {
	// Name is the kind's name as users read it, e.g. "Deployment".
	Name() string
	// Describe says what reloader knows of the kind besides its objects.
	Describe() Description
	NewObject() client.Object
	NewList() client.ObjectList
	// PodTemplate returns the object's pod template; changing it changes the object.
	PodTemplate(obj client.Object) *corev1.PodTemplateSpec
	// PatchFrom returns the patch that turns original into the object now holding the changes.
	PatchFrom(original client.Object) client.Patch
}

// Pausable kinds can hold back a rollout (Deployments, for the pause-period annotation).
type Pausable interface {
	Paused(obj client.Object) bool
	SetPaused(obj client.Object, paused bool)
}

// Restartable kinds can restart their pods without a pod template change (Argo Rollouts).
type Restartable interface {
	Restart(obj client.Object, at time.Time)
}

// Referencing kinds may run the pod template of another workload (a Rollout's workloadRef).
type Referencing interface {
	// TemplateRef names the workload of kind References whose template obj runs, or "".
	TemplateRef(obj client.Object) string
	// References is the name of the kind TemplateRef names ("Deployment").
	References() string
}

// Recreated kinds can't change the pod template of an existing object: a reload replaces the
// object by a new one of the same name (Jobs).
type Recreated interface {
	// Finished reports whether the object's work is done; it is only replaced on request.
	Finished(obj client.Object) bool
	// Replacement returns a new object to create in place of obj, carrying obj's desired state.
	Replacement(obj client.Object) client.Object
}

// Scheduled kinds run their pod template later; a reload may also start a run now (CronJobs).
type Scheduled interface {
	Suspended(obj client.Object) bool
	// RunNow returns a Job named name that runs obj's template now.
	RunNow(obj client.Object, name string) client.Object
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
	desc     Description
	template func(PT) *corev1.PodTemplateSpec
	// custom marks a kind served by a CustomResourceDefinition or an aggregated API, which
	// take no strategic merge patches; writes there are merge patches that fail on conflict,
	// because a merge patch replaces whole lists.
	custom bool
}

func newTyped[T, L any, PT interface {
	*T
	client.Object
}, PL interface {
	*L
	client.ObjectList
}](name string, desc Description, template func(PT) *corev1.PodTemplateSpec) typed[T, L, PT, PL] {
	return typed[T, L, PT, PL]{name: name, desc: desc, template: template}
}

func (k typed[T, L, PT, PL]) Name() string               { return k.name }
func (k typed[T, L, PT, PL]) Describe() Description      { return k.desc }
func (k typed[T, L, PT, PL]) NewObject() client.Object   { return PT(new(T)) }
func (k typed[T, L, PT, PL]) NewList() client.ObjectList { return PL(new(L)) }
func (k typed[T, L, PT, PL]) PodTemplate(obj client.Object) *corev1.PodTemplateSpec {
	return k.template(obj.(PT))
}
func (k typed[T, L, PT, PL]) PatchFrom(original client.Object) client.Patch {
	if k.custom {
		return client.MergeFromWithOptions(original, client.MergeFromWithOptimisticLock{})
	}
	return client.StrategicMergeFrom(original)
}
