package controller

import (
	"maps"

	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/reloader-operator/reloader/internal/flap"
	"github.com/reloader-operator/reloader/internal/gate/wave"
	"github.com/reloader-operator/reloader/internal/reload"
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
			return cachedHash(e.ObjectOld) != cachedHash(e.ObjectNew) ||
				o[keys.Ignore] != n[keys.Ignore] ||
				o[keys.Match] != n[keys.Match] ||
				o[flap.ReleaseAnnotation] != n[flap.ReleaseAnnotation] ||
				wave.AnnotationsChanged(o, n) ||
				labels && !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
		},
	}
}

// laterSources stops the sources of the informer's first list on their way to the workload
// reconcilers: every workload is reconciled at start through its own first list, so they
// would only repeat a lookup per source and kind. It also keeps the handler quick while the
// list streams in, so that client-go's buffer of pending events for it (one per handler,
// never shrunk) stays small. (The webhook notifier needs them: they are its first sight.)
func laterSources() predicate.Predicate {
	return predicate.Funcs{CreateFunc: func(e event.CreateEvent) bool { return !e.IsInInitialList }}
}

// workloadChanged lets through spec, annotation and label changes of workloads (labels choose
// the targets of ReloaderConfigs), never status churn.
func workloadChanged() predicate.Predicate {
	return predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{})
}

// SourceContentOrLabelsChanged lets through source updates that change what a status shows:
// the content hash, or the labels that selectors match.
func SourceContentOrLabelsChanged() predicate.Predicate {
	return predicate.Or(predicate.LabelChangedPredicate{}, predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return cachedHash(e.ObjectOld) != cachedHash(e.ObjectNew)
		},
	})
}
