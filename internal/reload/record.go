package reload

import (
	"encoding/json"
	"fmt"
	"maps"

	"github.com/reloader-operator/reloader/internal/source"
)

// Record maps each source a workload depends on ("configmap/name") to the content hash last
// applied to it. It is stored in RecordAnnotation on the workload.
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
func (r Record) Encode() string {
	b, _ := json.Marshal(map[string]string(r)) // a map of strings always marshals
	return string(b)
}

// Equal reports whether two records hold the same hashes.
func (r Record) Equal(o Record) bool { return maps.Equal(r, o) }

// Diff compares the hashes of the sources that concern a workload now with the record of what
// was last applied. It returns the sources whose content changed and the record to store.
//
// A workload seen for the first time (no record) is only recorded, never reloaded: installing
// or upgrading reloader must not restart anything. A source that newly concerns the workload
// is recorded without a reload; a source that no longer exists or concerns it is forgotten.
func Diff(last Record, hasRecord bool, current map[source.ID]string) (changed []source.ID, next Record) {
	next = make(Record, len(current))
	for id, h := range current {
		next[id.String()] = h
		if old, ok := last[id.String()]; hasRecord && ok && old != h {
			changed = append(changed, id)
		}
	}
	return changed, next
}
