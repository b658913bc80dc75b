package reload

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/source"
)

// Record maps each source a workload depends on ("configmap/name") to the content hash last
// applied to it. It is stored in RecordAnnotation on the workload. A record too large for an
// annotation is stored folded (see MaxRecordBytes); a folded record read back holds bucket
// digests under keys that name no source, which Diff understands.
type Record map[string]string

// ParseRecord decodes a RecordAnnotation value.
func ParseRecord(v string) (Record, error) {
	r := Record{}
	if err := json.Unmarshal([]byte(v), &r); err != nil {
		return nil, fmt.Errorf("annotation %s is not a JSON object of hashes: %w", RecordAnnotation, err)
	}
	return r, nil
}

// Encode returns the annotation value; keys come out sorted, so equal records encode equally.
// A record whose encoding would pass MaxRecordBytes is folded first.
func (r Record) Encode() string {
	b, _ := json.Marshal(map[string]string(r)) // a map of strings always marshals
	if len(b) > MaxRecordBytes && !r.folded() {
		b, _ = json.Marshal(map[string]string(r.fold()))
	}
	return string(b)
}

// Equal reports whether two records hold the same hashes.
func (r Record) Equal(o Record) bool { return maps.Equal(r, o) }

// Absent is the recorded hash of a source that concerns a workload but does not exist.
const Absent = ""

// Events says which lifecycle events of a source reload, besides content changes
// (--reload-on-create, --reload-on-delete).
type Events struct {
	OnCreate bool
	OnDelete bool
}

// Diff compares the hashes of the sources that concern a workload now (Absent for those that
// do not exist) with the record of what was last applied. It returns the sources to reload
// (with Absent for a deletion) and the record to store.
//
// A workload seen for the first time (no record) is only recorded, never reloaded: installing
// or upgrading reloader must not restart anything. A source that newly concerns the workload
// is recorded without a reload; one that no longer concerns it is forgotten. A source that
// appears where Absent was recorded was created; one that disappears was deleted: each reloads
// only when ev says so. An unreported deletion keeps the last hash, so a re-created source
// with other content still reloads. A source whose hash now covers another set of its keys
// (hash.KeySet: a keys annotation edited) is recorded without a reload, like one that newly
// concerns the workload: the two hashes measure different things.
func Diff(last Record, hasRecord bool, current map[source.ID]string, ev Events) (changed []source.ID, next Record) {
	if hasRecord && last.folded() {
		return diffFolded(last, current, ev)
	}
	next = make(Record, len(current))
	for id, h := range current {
		next[id.String()] = h
		old, known := last[id.String()]
		switch {
		case !hasRecord || !known || old == h:
		case old == Absent:
			if ev.OnCreate {
				changed = append(changed, id)
			}
		case h == Absent:
			if ev.OnDelete {
				changed = append(changed, id)
			} else {
				next[id.String()] = old
			}
		case hash.KeySet(old) != hash.KeySet(h):
		case !covered(id.Kind, old, h):
			changed = append(changed, id)
		}
	}
	slices.SortFunc(changed, source.CompareIDs)
	return changed, next
}

// covered reports whether the content last applied still stands for the current content.
func covered(kind source.Kind, applied, current string) bool {
	if kind == source.SecretProviderClass {
		return hash.VersionsCovered(applied, current)
	}
	return applied == current
}
