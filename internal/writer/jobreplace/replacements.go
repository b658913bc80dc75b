package jobreplace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reloader-operator/reloader/internal/writer"
)

// A replacement (delete, then create under the same name) is written down before the delete,
// as a ControllerRevision beside the object: a snapshot of the object to create, which the
// API server keeps if reloader dies between the delete and the create. The controller of the
// kind watches these records, so the process that leads next finishes the replacement.
// ControllerRevisions are namespaced and readable by whoever may read the object itself (the
// view role grants both), so the copy exposes nothing new; no other controller adopts them,
// since their labels match no StatefulSet or DaemonSet selector. Anyone who may create
// ControllerRevisions can make one look like a record: a record is acted on only once read
// back whole from the API server and found signed by reloader (records.go).
const (
	// ReplacementLabel marks reloader's records; its value is the kind replaced.
	ReplacementLabel = "reloader.dev/replacement-of"
	// replacesUIDAnnotation is the UID of the object the record replaces.
	replacesUIDAnnotation = "reloader.dev/replaces-uid"
	// replacesNameAnnotation is the name of the object replaced.
	replacesNameAnnotation = "reloader.dev/replaces-name"
)

// ReplacementRecords is the cache setting for the records: reloader's own ControllerRevisions
// only, not the revision history of every StatefulSet and DaemonSet, and without their data.
// Anyone who may create ControllerRevisions can label one as a record, so what the cache
// holds of each must stay small whatever they write; the data is read from the API server
// only when a record is acted on (trusted).
func ReplacementRecords() (client.Object, cache.ByObject) {
	sel, _ := labels.Parse(ReplacementLabel)
	return &appsv1.ControllerRevision{}, cache.ByObject{Label: sel, Transform: dropRecordData}
}

// dropRecordData keeps of a record what the controller reads through the cache: its identity,
// its label, and reloader's annotations (the name and UID it replaces, its MAC). Its data, the
// other labels and annotations, owner references, finalizers and managed fields go: anyone
// who may write ControllerRevisions could fill each with up to 256 KiB. (This Transform
// replaces the cache's default one, which drops the managed fields.)
//
// Each field is written only where something is left to drop: the informer may hand the
// transform a record its cache already holds (a re-list, a shard hand-over's deletes) while
// the controller reads it without a copy, and a map written while read is fatal.
func dropRecordData(o any) (any, error) {
	rec, ok := o.(*appsv1.ControllerRevision)
	if !ok {
		return o, nil
	}
	if rec.Data.Raw != nil || rec.Data.Object != nil {
		rec.Data = runtime.RawExtension{}
	}
	if rec.ManagedFields != nil {
		rec.ManagedFields = nil
	}
	if rec.OwnerReferences != nil {
		rec.OwnerReferences = nil
	}
	if rec.Finalizers != nil {
		rec.Finalizers = nil
	}
	if labels := []string{ReplacementLabel}; !kept(rec.Labels, labels) {
		rec.Labels = keep(rec.Labels, labels...)
	}
	if annotations := []string{replacesUIDAnnotation, replacesNameAnnotation, recordMACAnnotation}; !kept(rec.Annotations, annotations) {
		rec.Annotations = keep(rec.Annotations, annotations...)
	}
	return rec, nil
}

// kept reports whether m is as keep(m, keys...) leaves it: nil, or not empty and of keys
// only.
func kept(m map[string]string, keys []string) bool {
	if m == nil {
		return true
	}
	if len(m) == 0 {
		return false
	}
	for k := range m {
		if !slices.Contains(keys, k) {
			return false
		}
	}
	return true
}

// keep returns the entries of m under keys, nil if none.
func keep(m map[string]string, keys ...string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = make(map[string]string, len(keys))
			}
			out[k] = v
		}
	}
	return out
}

// recordName names the record of a replacement of the object called name: one per name, so
// that a new replacement finds and replaces a stale one.
func recordName(kind, name string) string {
	n := "reloader-" + strings.ToLower(kind) + "-" + name
	if len(n) > 253 {
		sum := sha256.Sum256([]byte(name))
		n = "reloader-" + strings.ToLower(kind) + "-" + hex.EncodeToString(sum[:16])
	}
	return n
}

// writeRecord stores the replacement fresh of the object old before old is deleted.
func (w *Writer) writeRecord(ctx context.Context, old, fresh client.Object) (pendingJob, error) {
	data, err := json.Marshal(fresh)
	if err != nil {
		return pendingJob{}, err
	}
	if len(data) > maxRecordData {
		// No record would be trusted back, so no delete: the Job stays as it is.
		return pendingJob{}, fmt.Errorf("%s %s is %d bytes, too large to replace safely (at most %d)", w.Kind.Name(), old.GetName(), len(data), maxRecordData)
	}
	rec := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: old.GetNamespace(),
			Name:      recordName(w.Kind.Name(), old.GetName()),
			Labels:    map[string]string{ReplacementLabel: w.Kind.Name()},
			Annotations: map[string]string{
				replacesUIDAnnotation:  string(old.GetUID()),
				replacesNameAnnotation: old.GetName(),
			},
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: 1,
	}
	err = w.Client.Create(ctx, rec, client.FieldOwner(writer.FieldOwner))
	if apierrors.IsAlreadyExists(err) {
		// Left by an earlier replacement of this name; the object is here, so it is done.
		stale := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: rec.Namespace, Name: rec.Name}}
		if err := w.Client.Delete(ctx, stale); client.IgnoreNotFound(err) != nil {
			return pendingJob{}, fmt.Errorf("delete stale replacement record: %w", err)
		}
		rec.ResourceVersion = ""
		err = w.Client.Create(ctx, rec, client.FieldOwner(writer.FieldOwner))
	}
	if err != nil {
		return pendingJob{}, fmt.Errorf("write replacement record: %w", err)
	}
	nn := client.ObjectKeyFromObject(old)
	p := pendingJob{obj: fresh, replaces: old.GetUID(), record: rec.UID}
	if err := w.signRecord(ctx, rec, old, data); err != nil {
		// The Job is not deleted; an unsigned record must not wait for a crash to be refused.
		return pendingJob{}, errors.Join(err, w.dropRecord(ctx, nn, p))
	}
	w.jobs.put(nn, p)
	return p, nil
}

// dropRecord forgets a replacement that is done or must not happen.
func (w *Writer) dropRecord(ctx context.Context, nn types.NamespacedName, p pendingJob) error {
	rec := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: nn.Namespace, Name: recordName(w.Kind.Name(), nn.Name)}}
	var opts []client.DeleteOption
	if p.record != "" {
		// Only this record: a newer one of the same name belongs to a newer replacement.
		opts = append(opts, client.Preconditions{UID: &p.record})
	}
	if err := w.Client.Delete(ctx, rec, opts...); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete replacement record: %w", err)
	}
	w.jobs.done(nn, p.record)
	return nil
}

// recordOf reads what the cache holds of a record: the name and UID it says it replaces and
// its own UID, not the object it holds, which trusted reads and checks before anything is
// created. ok is false for objects that are not a record of w.Kind; refused is set for one
// labelled as a record of w.Kind but not named as the record of the object it names
// (recordName): reloader never wrote it, and it must not stand for the record of that object.
func (w *Writer) recordOf(o client.Object) (_ types.NamespacedName, _ pendingJob, ok bool, refused *refusal) {
	rec, isRec := o.(*appsv1.ControllerRevision)
	if !isRec || rec.Labels[ReplacementLabel] != w.Kind.Name() {
		return types.NamespacedName{}, pendingJob{}, false, nil
	}
	if refused = misnamed(w.Kind.Name(), rec); refused != nil {
		return types.NamespacedName{}, pendingJob{}, false, refused
	}
	nn := types.NamespacedName{Namespace: rec.Namespace, Name: rec.Annotations[replacesNameAnnotation]}
	return nn, pendingJob{replaces: types.UID(rec.Annotations[replacesUIDAnnotation]), record: rec.UID}, true, nil
}

// Watch lets the controller of the replaced kind hear of the records (writer.Watcher): each
// one seen is remembered and its object reconciled, so that a replacement left half done by a
// process that died is finished by the next.
func (w *Writer) Watch(b *builder.Builder) *builder.Builder {
	seen := func(ctx context.Context, o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		nn, p, ok, misnamed := w.recordOf(o)
		switch {
		case ok:
			w.jobs.learn(nn, p)
			q.Add(reconcile.Request{NamespacedName: nn})
		case misnamed != nil:
			w.refuseRecord(ctx, o.(*appsv1.ControllerRevision), misnamed)
		}
	}
	h := handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			seen(ctx, e.Object, q)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if nn, p, ok, _ := w.recordOf(e.Object); ok {
				w.jobs.done(nn, p.record)
			}
		},
	}
	return b.Watches(&appsv1.ControllerRevision{}, h, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[ReplacementLabel] == w.Kind.Name()
	})))
}
