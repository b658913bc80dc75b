package sourcecache

import (
	"maps"

	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/reloader-operator/reloader/internal/flap"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/waves"
)

// SourceChanged lets through source updates that can change a decision: new content, or a
// change of the ignore or match annotation, of the flap breaker's release or of the waves'
// annotations (opt-in, resume, abort), and, where ReloaderConfigs choose sources by
// label (labels true), a label change: a source that gains a selected label is recorded
// then, so that its next change reloads. Other edits and identical re-applies stop here.
func SourceChanged(keys reload.Keys, labels bool) predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.GetAnnotations(), e.ObjectNew.GetAnnotations()
			return CachedHash(e.ObjectOld) != CachedHash(e.ObjectNew) ||
				o[keys.Ignore] != n[keys.Ignore] ||
				o[keys.Match] != n[keys.Match] ||
				o[flap.ReleaseAnnotation] != n[flap.ReleaseAnnotation] ||
				wavesChanged(o, n) ||
				labels && !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
		},
	}
}

// wavesChanged reports whether a source's waves annotations differ between o and n: a resume
// or abort is acted on at once, not at the next look of a held workload.
func wavesChanged(o, n map[string]string) bool {
	for _, k := range []string{waves.Annotation, waves.ResumeAnnotation, waves.AbortAnnotation} {
		if o[k] != n[k] {
			return true
		}
	}
	return false
}

// LaterSources stops the sources of the informer's first list on their way to the workload
// reconcilers: every workload is reconciled at start through its own first list, so they
// would only repeat a lookup per source and kind. It also keeps the handler quick while the
// list streams in, so that client-go's buffer of pending events for it (one per handler,
// never shrunk) stays small. (The webhook notifier needs them: they are its first sight.)
func LaterSources() predicate.Predicate {
	return predicate.Funcs{CreateFunc: func(e event.CreateEvent) bool { return !e.IsInInitialList }}
}

// SourceContentOrLabelsChanged lets through source updates that change what a status shows:
// the content hash, or the labels that selectors match.
func SourceContentOrLabelsChanged() predicate.Predicate {
	return predicate.Or(predicate.LabelChangedPredicate{}, predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return CachedHash(e.ObjectOld) != CachedHash(e.ObjectNew)
		},
	})
}
