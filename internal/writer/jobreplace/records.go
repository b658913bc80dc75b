package jobreplace

import (
	"context"
	"crypto/hmac"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/hashkey"
	"github.com/reloader-operator/reloader/internal/termsafe"
	"github.com/reloader-operator/reloader/internal/workload"
	"github.com/reloader-operator/reloader/internal/writer"
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
	// refusedMisnamed is a record not called what reloader calls the record of the object it
	// names (recordName): never reloader's, and never let near the replacement under way.
	refusedMisnamed = "misnamed"
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
	if refused := misnamed(kind.Name(), rec); refused != nil {
		return nil, refused
	}
	return obj, nil
}

// misnamed refuses a record that is not called what reloader calls the record of the object
// it says it replaces (recordName): reloader keeps one record per name, and a record under any
// other name must never stand for, or displace, the replacement under way.
func misnamed(kind string, rec *appsv1.ControllerRevision) *refusal {
	name := rec.Annotations[replacesNameAnnotation]
	if want := recordName(kind, name); name == "" || rec.Name != want {
		return &refusal{refusedMisnamed, fmt.Sprintf("it is not named as reloader names the record of %s %q (%s)", kind, name, want)}
	}
	return nil
}

// KeySource gives the install key that signs the records once it is loaded: a hash.Key, or
// a hashkey.Loader (whose key signs only when it lives in reloader's own namespace).
type KeySource interface {
	// Wait blocks until the key is loaded or ctx ends.
	Wait(ctx context.Context) error
	Key() hash.Key
}

// recordKey is the install key that signs records (hashkey.Signing); not Valid when there is
// none, or it is not reloader's own: only this process's records, in memory, are trusted
// then. An error when the key has not loaded in time: the reconcile is retried, not held.
func (w *Writer) recordKey(ctx context.Context) (hash.Key, error) {
	if w.Key == nil {
		return hash.Key{}, nil
	}
	key, err := hashkey.Signing(ctx, w.Key)
	if err != nil {
		return hash.Key{}, fmt.Errorf("replacement records need the install key: %w", err)
	}
	return key, nil
}

// signRecord puts the MAC on a record just created, now that the API server has given it its
// UID, which the MAC covers; data is what was sent. That is a second write per Job
// replacement (Job reloads are rare), and a record left unsigned by a crash between the two
// replaces a Job that was never deleted, so it is dropped without creating anything
// (createReplacement). Without a valid key the record is left unsigned, and only this
// process, which holds it in memory, will act on it.
func (w *Writer) signRecord(ctx context.Context, rec *appsv1.ControllerRevision, old client.Object, data []byte) error {
	key, err := w.recordKey(ctx)
	if err != nil {
		return err
	}
	if !key.Valid() {
		log.FromContext(ctx).Info("no valid install key: this Job replacement record is trusted from memory only; if reloader stops before the new Job is created, no other process re-creates it",
			"record", rec.Name)
		return nil
	}
	unsigned := rec.DeepCopy()
	rec.Annotations[recordMACAnnotation] = hex.EncodeToString(recordMAC(key, w.Kind.Name(), old.GetNamespace(), old.GetName(), old.GetUID(), rec.UID, data))
	// With its resourceVersion, the patch signs this record as created, or fails.
	if err := w.Client.Patch(ctx, rec, client.MergeFromWithOptions(unsigned, client.MergeFromWithOptimisticLock{}), client.FieldOwner(writer.FieldOwner)); err != nil {
		return fmt.Errorf("sign replacement record: %w", err)
	}
	return nil
}

// trusted reads the record of a replacement seen only through the cache, which keeps no
// data, from the API server and checks it. ok is false when there is nothing to act on: the
// record is gone, or refused. A record found under the name in place of p's (p's was deleted
// and another created) is checked on its own.
func (w *Writer) trusted(ctx context.Context, nn types.NamespacedName, p pendingJob) (_ pendingJob, ok bool, err error) {
	reader := client.Reader(w.Client)
	if w.APIReader != nil {
		reader = w.APIReader
	}
	rec := &appsv1.ControllerRevision{}
	err = reader.Get(ctx, types.NamespacedName{Namespace: nn.Namespace, Name: recordName(w.Kind.Name(), nn.Name)}, rec)
	if err != nil && !apierrors.IsNotFound(err) {
		return p, false, fmt.Errorf("read replacement record: %w", err)
	}
	if err != nil {
		w.jobs.done(nn, p.record)
		return p, false, nil
	}
	if rec.UID != p.record {
		// The record p names is gone: a record is acted on only under this name. The one
		// here now is another, checked on its own; what is held of p is let go.
		w.jobs.done(nn, p.record)
		p = pendingJob{replaces: types.UID(rec.Annotations[replacesUIDAnnotation]), record: rec.UID}
	}
	if rec.Labels[ReplacementLabel] != w.Kind.Name() {
		w.jobs.done(nn, p.record)
		return p, false, nil
	}
	key, err := w.recordKey(ctx)
	if err != nil {
		return p, false, err
	}
	obj, refused := checkRecord(key, w.Kind, rec)
	if refused != nil {
		w.refuseRecord(ctx, rec, refused)
		w.jobs.done(nn, p.record)
		return p, false, nil
	}
	p = pendingJob{obj: obj, replaces: types.UID(rec.Annotations[replacesUIDAnnotation]), record: rec.UID}
	w.jobs.put(nn, p)
	return p, true, nil
}

// refuseRecord reports a record that is not acted on, and leaves it where it is: it is not
// reloader's to delete.
func (w *Writer) refuseRecord(ctx context.Context, rec *appsv1.ControllerRevision, why *refusal) {
	w.Report.RecordRefused(w.Kind.Name(), why.reason)
	log.FromContext(ctx).Info("WARNING: replacement record refused; nothing created", "record", rec.Namespace+"/"+rec.Name,
		"reason", why.reason, "why", why.why)
	w.Report.Event(rec, nil, true, ReasonUntrustedRecord, "Replace", termsafe.ClipNote(fmt.Sprintf("Not acting on this %s replacement record: %s. Nothing was created; delete it if no one needs it.", w.Kind.Name(), why.why)))
}
