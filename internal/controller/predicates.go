package controller

import (
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/reloader-operator/reloader/internal/writer"
)

// workloadChanged lets through spec, annotation and label changes of workloads (labels choose
// the targets of ReloaderConfigs), never status churn, nor the revision annotation alone that
// the Deployment controller writes through the status as each rollout starts (no decision
// reads it; a reload brought one reconcile more per rollout).
func workloadChanged() predicate.Predicate {
	return predicate.Or(predicate.GenerationChangedPredicate{}, annotationsChanged(), predicate.LabelChangedPredicate{})
}

// annotationsChanged is predicate.AnnotationChangedPredicate blind to the revision annotation.
func annotationsChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		if e.ObjectOld == nil || e.ObjectNew == nil {
			return false
		}
		return !sameBesides(e.ObjectOld.GetAnnotations(), e.ObjectNew.GetAnnotations(), writer.RevisionAnnotation)
	}}
}

// sameBesides reports whether a and b hold the same keys and values, those of skip aside.
func sameBesides(a, b map[string]string, skip ...string) bool {
	for k, v := range a {
		if w, ok := b[k]; (!ok || w != v) && !slices.Contains(skip, k) {
			return false
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok && !slices.Contains(skip, k) {
			return false
		}
	}
	return true
}
