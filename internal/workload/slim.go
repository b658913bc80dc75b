package workload

import (
	"reflect"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/cachemem/intern"
)

// LastAppliedAnnotation is kubectl's copy of the whole object as last applied: often the
// largest part of a cached workload, and never read by reloader.
const LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// DropLastApplied removes kubectl's last-applied copy from o's annotations, and the map when
// nothing is left in it.
func DropLastApplied(o client.Object) {
	a := o.GetAnnotations()
	if _, ok := a[LastAppliedAnnotation]; !ok {
		return // nothing written: the object may be one the cache's readers share
	}
	if len(a) == 1 {
		o.SetAnnotations(nil)
		return
	}
	kept := make(map[string]string, len(a)-1)
	for k, v := range a {
		if k != LastAppliedAnnotation {
			kept[k] = v
		}
	}
	o.SetAnnotations(kept)
}

// SlimTransform returns the cache transform of kind: it drops what no decision reads, so
// the cache holds metadata (annotations, labels, generation, resourceVersion, UID) and the
// spec (pod template, replicas, paused, update strategy) of each workload, and not the managed
// fields nor kubectl's last-applied copy. Metadata strings that repeat across objects are
// shared (intern.Tables.Meta). The status of a kind with a rollout is dropped too,
// except while a rollout is pending (the kind's controller has not observed the generation
// yet) or followed(obj) says the rollout is followed after a reload: the follower reads it
// then. Kinds without a rollout (Jobs, CronJobs) keep everything but the managed fields:
// a Job is re-created from its cached copy, annotations included. dropLabels drops the
// labels of the kinds with a rollout too: set it when no ReloaderConfig can select workloads,
// since nothing else reads them. tables are the manager's (nil: nothing is interned).
//
// Where a kind is written with strategic merge patches, the pod template is slimmed too
// (slimTemplate): such a patch merges containers, env and volumes by name and carries only
// what differs between the cached copy and the changed one, so fields absent from both are
// never written. A merge patch (custom kinds) replaces whole lists, and keeps its template.
//
// The informer may hand the transform an object its cache already holds (the shard streams
// pass on a stored object as its deletion when a shard is handed over) while handlers read
// it without a copy: a map written while read is fatal, and the status and template would be
// rebuilt under them. The first pass marks the object (slimMark), and an object so marked
// is returned untouched.
func SlimTransform(kind Kind, followed func(client.Object) bool, dropLabels bool, tables *intern.Tables) toolscache.TransformFunc {
	_, progressing := kind.(Progressing)
	strategic := kind.PatchFrom(kind.NewObject()).Type() == types.StrategicMergePatchType
	return func(in any) (any, error) {
		obj, ok := in.(client.Object)
		if !ok || obj.GetSelfLink() == slimMark {
			return in, nil
		}
		obj.SetSelfLink(slimMark)
		obj.SetManagedFields(nil)
		if progressing {
			if dropLabels {
				obj.SetLabels(nil)
			}
			DropLastApplied(obj)
		}
		tables.Meta(obj) // after the drops: nothing dropped is interned
		if !progressing {
			return obj, nil
		}
		if status := statusOf(obj); status.IsValid() && observed(status, obj.GetGeneration()) && (followed == nil || !followed(obj)) {
			status.SetZero()
			markDropped(status)
		}
		if strategic {
			slimTemplate(kind.PodTemplate(obj))
			dropSpecFields(obj, "Selector", "VolumeClaimTemplates")
		}
		return obj, nil
	}
}

// slimMark is the selfLink of a workload SlimTransform has been through. The API server has
// left selfLink unset on every object since v1.20 (RemoveSelfLink, GA in v1.24) and drops one
// a client sends (controller's TestServerNeverSendsSelfLink), so no object from it is marked;
// and a patch made from a cached copy carries no field both sides hold alike. The mark costs
// no memory (a constant) and reaches no request.
const slimMark = "reloader-slim"

// slimTemplate keeps of a pod template what decisions and reloads read: its annotations
// (rules, the annotations strategy), its volumes (references, used keys), and of each
// container its name (the patch's merge key), env (references, the env-vars strategy; kept
// whole, since order matters to $(VAR) expansion), envFrom and the names of its volume
// mounts. Images, commands, probes, resources, scheduling and the template's labels go.
func slimTemplate(tpl *corev1.PodTemplateSpec) {
	if tpl == nil {
		return
	}
	tpl.ObjectMeta = metav1.ObjectMeta{Annotations: tpl.Annotations}
	tpl.Spec = corev1.PodSpec{
		Volumes:        tpl.Spec.Volumes,
		InitContainers: slimContainers(tpl.Spec.InitContainers),
		Containers:     slimContainers(tpl.Spec.Containers),
	}
}

func slimContainers(in []corev1.Container) []corev1.Container {
	if in == nil {
		return nil
	}
	out := make([]corev1.Container, len(in))
	for i, c := range in {
		out[i] = corev1.Container{Name: c.Name, Env: c.Env, EnvFrom: c.EnvFrom}
		if c.VolumeMounts != nil {
			out[i].VolumeMounts = make([]corev1.VolumeMount, len(c.VolumeMounts))
			for j, m := range c.VolumeMounts {
				out[i].VolumeMounts[j] = corev1.VolumeMount{Name: m.Name}
			}
		}
	}
	return out
}

// dropSpecFields zeroes the named fields of a typed workload's spec, where it has them: the
// pod selector and a StatefulSet's claim templates, which no decision reads and no reload
// writes.
func dropSpecFields(obj client.Object, names ...string) {
	spec := structField(obj, "Spec")
	if !spec.IsValid() {
		return
	}
	for _, name := range names {
		if f := spec.FieldByName(name); f.IsValid() && f.CanSet() {
			f.SetZero()
		}
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
func statusOf(obj client.Object) reflect.Value { return structField(obj, "Status") }

// structField is the struct field name of a typed workload, settable; invalid when it has
// none.
func structField(obj client.Object, name string) reflect.Value {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}
	}
	f := v.Elem().FieldByName(name)
	if !f.IsValid() || !f.CanSet() || f.Kind() != reflect.Struct {
		return reflect.Value{}
	}
	return f
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
