package controller

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
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

// SeriesRecorder returns rec with the regarding object of every Event named by reference,
// without its resourceVersion. client-go's broadcaster keys the Events it has sent on the
// whole reference and keeps each key for minutes; every reload moves the workload's
// resourceVersion, so each reload of a busy workload would be a new cached Event. Without
// it, repeated Events about one object aggregate into one Event series (count, last seen),
// and memory stays flat under churn. The UID stays: `kubectl describe` selects on it.
func SeriesRecorder(rec recorder.EventRecorder, scheme *runtime.Scheme) recorder.EventRecorder {
	return seriesRecorder{rec: rec, scheme: scheme}
}

type seriesRecorder struct {
	rec    recorder.EventRecorder
	scheme *runtime.Scheme
}

func (s seriesRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	s.rec.Eventf(s.ref(regarding), related, eventtype, reason, action, note, args...)
}

func (s seriesRecorder) AnnotatedEventf(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	s.rec.AnnotatedEventf(s.ref(regarding), related, annotations, eventtype, reason, action, note, args...)
}

// ref is o's reference without resourceVersion; o itself when it is no object of the scheme.
func (s seriesRecorder) ref(o runtime.Object) runtime.Object {
	obj, ok := o.(client.Object)
	if !ok {
		return o
	}
	gvk, err := apiutil.GVKForObject(obj, s.scheme)
	if err != nil {
		return o
	}
	return &corev1.ObjectReference{
		APIVersion: gvk.GroupVersion().String(),
		Kind:       gvk.Kind,
		Namespace:  obj.GetNamespace(),
		Name:       obj.GetName(),
		UID:        obj.GetUID(),
	}
}
