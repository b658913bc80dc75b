package controller

import "sigs.k8s.io/controller-runtime/pkg/predicate"

// workloadChanged lets through spec, annotation and label changes of workloads (labels choose
// the targets of ReloaderConfigs), never status churn.
func workloadChanged() predicate.Predicate {
	return predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{})
}
