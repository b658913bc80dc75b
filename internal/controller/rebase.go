package controller

import (
	"maps"

	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
)

// rebase returns the record with the Secret hashes made by another key replaced by the
// current key's hash of the same Secret, so that reload.Diff compares like with like and a
// change of key never rolls a workload.
//
//   - A hash of the UID-keyed scheme (releases before the install key) is checked against the
//     Secret's UID-keyed hash now: equal means the content is what was applied, and the record
//     is upgraded without a rollout; different means the content changed (or the Secret was
//     re-created, which that scheme counted as a change), and the reload happens.
//   - A hash from another install key can't be checked (that key is gone): it is re-based.
//     A Secret change made between the last reconcile under the old key and the first under
//     the new one is missed; a key change must never restart every workload that uses a
//     Secret, and that is the trade-off.
func rebase(last reload.Record, current map[source.ID]sourcecache.Observed) reload.Record {
	var out reload.Record
	for id, o := range current {
		if id.Kind != source.Secret || o.Hash() == reload.Absent {
			continue
		}
		old, ok := last[id.String()]
		if !ok || old == reload.Absent || old == o.Hash() {
			continue
		}
		oldKey, keyed := hash.KeyID(old)
		newKey, _ := hash.KeyID(o.Hash())
		switch {
		case keyed && oldKey == newKey:
			continue // same key: a real comparison
		case !keyed && old != o.UIDHash():
			continue // UID-keyed and different: the content changed
		}
		if out == nil {
			out = maps.Clone(last)
		}
		out[id.String()] = o.Hash()
	}
	if out == nil {
		return last
	}
	return out
}
