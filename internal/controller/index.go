package controller

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/workload"
)

// IndexSources indexes workloads by the sources that may concern them: "configmap/name" for
// each reference in the pod template, and "configmap/*" when the workload names ConfigMaps in a
// reload annotation (names there are regular expressions, so they can't be indexed by value).
const IndexSources = "reloader.sources"

func anyOf(kind source.Kind) string { return string(kind) + "/*" }

func sourceIndexer(kind workload.Kind, keys reload.Keys) client.IndexerFunc {
	return func(obj client.Object) []string {
		tpl := kind.PodTemplate(obj)
		var values []string
		for _, ref := range source.Refs(&tpl.Spec) {
			values = append(values, ref.ID.String())
		}
		rules, _ := reload.ParseRules(keys, obj.GetAnnotations(), tpl.Annotations)
		for _, k := range source.Kinds {
			if rules.HasNamed(k) {
				values = append(values, anyOf(k))
			}
		}
		return values
	}
}
