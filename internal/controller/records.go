package controller

import (
	"context"
	"crypto/hmac"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/hashkey"
	"github.com/reloader-operator/reloader/internal/workload"
)

// Trust in replacement records. Anyone who may create ControllerRevisions in a namespace can
// write an object that looks like a record; acting on one would have reloader create, with its
// own rights, whatever the record's data says. So a record is acted on only when it carries a
// MAC under the install's key (internal/hashkey) over its data and the identity of the object
// it replaces, and only to create that object, in the record's namespace, under the replaced
// object's name. The MAC also covers the record's own UID, which the API server assigns at
// create and no one can choose: a genuine record saved by someone who may read it and created
// again later (after an admin deleted the Job, say) has a new UID, and is refused. Without a
// valid key, only the records this process wrote, held in memory, are acted on.
const (
	// recordMACAnnotation holds the hex MAC of a record (recordMAC).
	recordMACAnnotation = "reloader.dev/record-mac"
	// recordMACPurpose derives the records' sub-key from the install key, apart from the key
	// of Secret hashes.
	recordMACPurpose = "replacement-record"
	// maxRecordData bounds a record's data: a Job is well under it, and neither a record
	// written nor one read back above it is used (etcd itself takes objects up to 1.5 MiB).
	maxRecordData = 1<<20 + 64<<10
	// ReasonUntrustedRecord is the Event reason on a record that is not acted on.
	ReasonUntrustedRecord = "UntrustedRecord"
)

// Reasons a record is refused, the reason label of reloader_replacement_records_refused_total.
const (
	refusedUnauthenticated = "unauthenticated"
	refusedMisplaced       = "misplaced"
	refusedOversized       = "oversized"
)

// recordMAC authenticates a record: its data, the kind, namespace, name and UID of the object
// it replaces, and the UID of the record itself, each length-prefixed so that no two field
// lists encode alike. Nil without a valid key.
func recordMAC(key hash.Key, kind, namespace, name string, uid, record types.UID, data []byte) []byte {
	var msg []byte
	for _, f := range [][]byte{[]byte(kind), []byte(namespace), []byte(name), []byte(uid), []byte(record), data} {
		msg = binary.BigEndian.AppendUint64(msg, uint64(len(f)))
		msg = append(msg, f...)
	}
	return key.MAC(recordMACPurpose, msg)
}

// refusal says why a record is not acted on.
type refusal struct{ reason, why string }

func (e *refusal) Error() string { return e.why }

// checkRecord decides, purely, whether a record read from the API server may be acted on,
// and returns the object it creates.
func checkRecord(key hash.Key, kind workload.Kind, rec *appsv1.ControllerRevision) (client.Object, *refusal) {
	name := rec.Annotations[replacesNameAnnotation]
	switch {
	case len(rec.Data.Raw) > maxRecordData:
		return nil, &refusal{refusedOversized, fmt.Sprintf("its data is %d bytes, over the %d a record may hold", len(rec.Data.Raw), maxRecordData)}
	case !key.Valid():
		return nil, &refusal{refusedUnauthenticated, "reloader has no valid install key (Secret " + hashkey.SecretName + "), so it trusts only the records it wrote itself, in memory"}
	}
	mac, err := hex.DecodeString(rec.Annotations[recordMACAnnotation])
	want := recordMAC(key, kind.Name(), rec.Namespace, name, types.UID(rec.Annotations[replacesUIDAnnotation]), rec.UID, rec.Data.Raw)
	if err != nil || !hmac.Equal(mac, want) {
		return nil, &refusal{refusedUnauthenticated, "it has no valid " + recordMACAnnotation + ": reloader did not write it (a copy of a record created again is not the record reloader wrote), or wrote it under another install key"}
	}
	obj := kind.NewObject()
	if err := json.Unmarshal(rec.Data.Raw, obj); err != nil {
		return nil, &refusal{refusedMisplaced, fmt.Sprintf("its data is no %s: %v", kind.Name(), err)}
	}
	if obj.GetNamespace() != rec.Namespace || obj.GetName() != name {
		// Never re-placed: a record names exactly what it creates.
		return nil, &refusal{refusedMisplaced, fmt.Sprintf("its data is %s %s/%s, not %s/%s that it replaces", kind.Name(), obj.GetNamespace(), obj.GetName(), rec.Namespace, name)}
	}
	return obj, nil
}

// recordKey is the install key, once loaded; not Valid when there is none.
func (r *WorkloadReconciler) recordKey() hash.Key {
	if r.RecordKey == nil || r.RecordKey.Wait() != nil {
		return hash.Key{}
	}
	return r.RecordKey.Key()
}

// signRecord puts the MAC on a record just created, now that the API server has given it its
// UID, which the MAC covers; data is what was sent. That is a second write per Job
// replacement (Job reloads are rare), and a record left unsigned by a crash between the two
// replaces a Job that was never deleted, so it is dropped without creating anything
// (createReplacement). Without a valid key the record is left unsigned, and only this
// process, which holds it in memory, will act on it.
func (r *WorkloadReconciler) signRecord(ctx context.Context, rec *appsv1.ControllerRevision, old client.Object, data []byte) error {
	key := r.recordKey()
	if !key.Valid() {
		log.FromContext(ctx).Info("no valid install key: this Job replacement record is trusted from memory only; if reloader stops before the new Job is created, no other process re-creates it",
			"record", rec.Name)
		return nil
	}
	unsigned := rec.DeepCopy()
	rec.Annotations[recordMACAnnotation] = hex.EncodeToString(recordMAC(key, r.Kind.Name(), old.GetNamespace(), old.GetName(), old.GetUID(), rec.UID, data))
	// With its resourceVersion, the patch signs this record as created, or fails.
	if err := r.Client.Patch(ctx, rec, client.MergeFromWithOptions(unsigned, client.MergeFromWithOptimisticLock{}), client.FieldOwner(FieldOwner)); err != nil {
		return fmt.Errorf("sign replacement record: %w", err)
	}
	return nil
}

// trusted reads the record of a replacement seen only through the cache, which keeps no
// data, from the API server and checks it. ok is false when there is nothing to act on: the
// record is gone or replaced by a newer one (which the watch brings), or refused.
func (r *WorkloadReconciler) trusted(ctx context.Context, nn types.NamespacedName, p pendingJob) (_ pendingJob, ok bool, err error) {
	reader := client.Reader(r.Client)
	if r.APIReader != nil {
		reader = r.APIReader
	}
	rec := &appsv1.ControllerRevision{}
	err = reader.Get(ctx, types.NamespacedName{Namespace: nn.Namespace, Name: recordName(r.Kind.Name(), nn.Name)}, rec)
	if err != nil && !apierrors.IsNotFound(err) {
		return p, false, fmt.Errorf("read replacement record: %w", err)
	}
	if err != nil || rec.UID != p.record || rec.Labels[ReplacementLabel] != r.Kind.Name() {
		r.jobs.done(nn, p.record)
		return p, false, nil
	}
	obj, refused := checkRecord(r.recordKey(), r.Kind, rec)
	if refused != nil {
		r.refuseRecord(ctx, rec, refused)
		r.jobs.done(nn, p.record)
		return p, false, nil
	}
	p = pendingJob{obj: obj, replaces: types.UID(rec.Annotations[replacesUIDAnnotation]), record: rec.UID}
	r.jobs.put(nn, p)
	return p, true, nil
}

// refuseRecord reports a record that is not acted on, and leaves it where it is: it is not
// reloader's to delete.
func (r *WorkloadReconciler) refuseRecord(ctx context.Context, rec *appsv1.ControllerRevision, why *refusal) {
	r.Metrics.RecordsRefused.WithLabelValues(r.Kind.Name(), why.reason).Inc()
	log.FromContext(ctx).Info("WARNING: replacement record refused; nothing created", "record", rec.Namespace+"/"+rec.Name,
		"reason", why.reason, "why", why.why)
	r.Recorder.Eventf(rec, nil, corev1.EventTypeWarning, ReasonUntrustedRecord, "Replace",
		"%s", clipNote(fmt.Sprintf("Not acting on this %s replacement record: %s. Nothing was created; delete it if no one needs it.", r.Kind.Name(), why.why)))
}
