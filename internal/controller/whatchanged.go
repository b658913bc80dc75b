package controller

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/whatchanged"
)

// whatChanged reports, per change of a reload, the key names and the writer of the source's
// change; obj is the workload as read, its record what was last applied. A source created since (Absent
// recorded) is reported with all its keys added, a deleted one with no keys.
func (r *WorkloadReconciler) whatChanged(w seen, obj client.Object, changes []reload.Change) []whatchanged.Report {
	// Parsed again, quietly: the plan reads the record, and logs it when unreadable.
	last, _ := reload.ParseRecord(obj.GetAnnotations()[reload.RecordAnnotation])
	out := make([]whatchanged.Report, len(changes))
	for i, ch := range changes {
		o, ok := w.sources[ch.ID]
		st := r.sourceType(ch.ID.Kind)
		if !ok || o.Object() == nil || st == nil || st.Pool != nil {
			continue
		}
		var keys whatchanged.Keys
		if st.KeyDigests != nil {
			var only []string
			if o.Restricted {
				only = append([]string{}, o.Keys...)
			}
			if was, recorded := last[ch.ID.String()]; recorded && was == reload.Absent {
				keys = whatchanged.Diff(nil, st.KeyDigestsOf(o.Object()), only)
			} else {
				keys, _ = r.Changes.Keys(*st, o.Object().GetNamespace(), ch.ID, o.Object(), only, last[ch.ID.String()])
			}
		}
		wr, known := r.Changes.Writer(*st, o.Object().GetNamespace(), ch.ID, o.Object())
		out[i] = whatchanged.NewReport(keys, wr, known)
	}
	return out
}

// sourceType is the type of the sources of kind; nil when not watched.
func (r *WorkloadReconciler) sourceType(kind source.Kind) *sourcecache.SourceType {
	for i := range r.Sources {
		if r.Sources[i].Kind == kind {
			return &r.Sources[i]
		}
	}
	return nil
}

// triggerManager is the metric label of a reload's writer: the manager of the newest change
// it carries (whatchanged.Label bounds the values).
func triggerManager(what []whatchanged.Report) string {
	var newest *whatchanged.Writer
	for _, w := range what {
		if c := w.ChangedBy; c != nil && (newest == nil || !c.Time.Before(newest.Time)) {
			newest = c
		}
	}
	if newest == nil {
		return whatchanged.Label("")
	}
	return whatchanged.Label(newest.Manager)
}

// writers are who wrote each existing source of w last, for explain.
func (r *WorkloadReconciler) writers(w seen) map[source.ID]whatchanged.Writer {
	out := map[source.ID]whatchanged.Writer{}
	for id, o := range w.sources {
		if st := r.sourceType(id.Kind); st != nil && o.Object() != nil && st.Pool == nil {
			if wr, ok := st.Writer(o.Object()); ok {
				out[id] = wr
			}
		}
	}
	return out
}

// whatLogged are the log fields of the i-th change's report: keys and changedBy, when known.
func whatLogged(what []whatchanged.Report, i int) []any {
	if i >= len(what) {
		return nil
	}
	var kv []any
	if k := what[i].Keys().String(); k != "" {
		kv = append(kv, "keys", k)
	}
	if w := what[i].ChangedBy; w != nil {
		kv = append(kv, "changedBy", w.String())
	}
	return kv
}
