package controller

import (
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// relatedRef names a source in an Event's related reference by kind, namespace and name only.
// The recorder would copy the object's UID and resourceVersion into it, and Events are
// readable by anyone with the view role: a Secret's UID must not be published (it keyed
// Secret hashes before the install key, and tells a re-created Secret from the old one).
func (r *WorkloadReconciler) relatedRef(o client.Object) runtime.Object {
	if o == nil {
		return nil
	}
	gvk, err := r.Client.GroupVersionKindFor(o)
	if err != nil {
		return nil // an Event without a related object is still worth sending
	}
	return &corev1.ObjectReference{
		APIVersion: gvk.GroupVersion().String(),
		Kind:       gvk.Kind,
		Namespace:  o.GetNamespace(),
		Name:       o.GetName(),
	}
}

// maxNote is the longest Event note the API server accepts (events.k8s.io/v1).
const maxNote = 1024

// clipNote shortens a note the API server would refuse, at a character boundary: a reload
// of many sources must still leave its Event.
func clipNote(note string) string {
	if len(note) <= maxNote {
		return note
	}
	const more = "…"
	cut := maxNote - len(more)
	for cut > 0 && !utf8.RuneStart(note[cut]) {
		cut--
	}
	return note[:cut] + more
}
