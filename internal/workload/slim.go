package workload

import (
	"reflect"
	"strconv"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LastAppliedAnnotation is kubectl's copy of the whole object as last applied: often the
// largest part of a cached workload, and never read by reloader.
const LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// SlimTransform returns the cache transform of kind: it drops what no decision reads, so
// the cache holds metadata (annotations, labels, generation, resourceVersion, UID) and the
// spec (pod template, replicas, paused, selector) of each workload, and not the managed
// fields nor kubectl's last-applied copy. The status of a kind with a rollout is dropped too,
// except while a rollout is pending (the kind's controller has not observed the generation
// yet) or followed(obj) says the rollout is followed after a reload: the follower reads it
// then. Kinds without a rollout (Jobs, CronJobs) keep everything but the managed fields:
// a Job is re-created from its cached copy, annotations included.
func SlimTransform(kind Kind, followed func(client.Object) bool) toolscache.TransformFunc {
	_, progressing := kind.(Progressing)
	return func(in any) (any, error) {
		obj, ok := in.(client.Object)
		if !ok {
			return in, nil
		}
		obj.SetManagedFields(nil)
		if !progressing {
			return obj, nil
		}
		if a := obj.GetAnnotations(); a[LastAppliedAnnotation] != "" {
			delete(a, LastAppliedAnnotation)
			obj.SetAnnotations(a)
		}
		if status := statusOf(obj); status.IsValid() && observed(status, obj.GetGeneration()) && (followed == nil || !followed(obj)) {
			status.SetZero()
			markDropped(status)
		}
		return obj, nil
	}
}

// dropped is the observedGeneration a dropped status is marked with: no controller writes
// it, so an empty status (a workload no controller has seen) is not taken for a dropped one.
const dropped = -1

func markDropped(status reflect.Value) {
	switch f := status.FieldByName("ObservedGeneration"); {
	case !f.IsValid():
	case f.Kind() == reflect.Int64:
		f.SetInt(dropped)
	case f.Kind() == reflect.String:
		f.SetString(strconv.Itoa(dropped))
	}
}

// StatusDropped reports whether the cache dropped obj's status (SlimTransform): a follower
// that meets such a copy reads the status from the API server.
func StatusDropped(obj client.Object) bool {
	status := statusOf(obj)
	if !status.IsValid() {
		return false
	}
	switch f := status.FieldByName("ObservedGeneration"); {
	case !f.IsValid():
		return false
	case f.Kind() == reflect.Int64:
		return f.Int() == dropped
	case f.Kind() == reflect.String:
		return f.String() == strconv.Itoa(dropped)
	}
	return false
}

// statusOf is the Status field of a typed workload, settable; invalid when it has none.
func statusOf(obj client.Object) reflect.Value {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}
	}
	s := v.Elem().FieldByName("Status")
	if !s.IsValid() || !s.CanSet() || s.Kind() != reflect.Struct {
		return reflect.Value{}
	}
	return s
}

// observed reports whether status says its controller has seen generation gen: an int64
// observedGeneration (built-in kinds, DeploymentConfigs) or a string one (Argo Rollouts).
func observed(status reflect.Value, gen int64) bool {
	f := status.FieldByName("ObservedGeneration")
	switch {
	case !f.IsValid():
		return false
	case f.Kind() == reflect.Int64:
		return f.Int() >= gen
	case f.Kind() == reflect.String:
		n, err := strconv.ParseInt(f.String(), 10, 64)
		return err == nil && n >= gen
	}
	return false
}
