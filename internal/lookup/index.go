package lookup

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/workload"
)

// IndexSources indexes workloads by the sources that may concern them: "configmap/name" for
// each reference in the pod template and each name in a reload annotation, "configmap/*" when
// a reload annotation holds a pattern for ConfigMaps (which can't be indexed by value), and
// "workloadref/name" when it runs the template of Deployment "name".
const IndexSources = "reloader.sources"

func anyOf(kind source.Kind) string { return string(kind) + "/*" }

func workloadRef(deployment string) string { return "workloadref/" + deployment }

// IndexWorkloads registers IndexSources for one workload kind.
func IndexWorkloads(ctx context.Context, indexer client.FieldIndexer, kind workload.Kind, keys reload.Keys) error {
	if err := indexer.IndexField(ctx, kind.NewObject(), IndexSources, sourceIndexer(kind, keys)); err != nil {
		return fmt.Errorf("index %s by source: %w", kind.Name(), err)
	}
	return nil
}

// IndexPooled registers sourcecache.IndexPooledSource for a pooled source type.
func IndexPooled(ctx context.Context, indexer client.FieldIndexer, st sourcecache.SourceType) error {
	if err := indexer.IndexField(ctx, st.NewObject(), sourcecache.IndexPooledSource, st.IndexValue); err != nil {
		return fmt.Errorf("index %ss by source: %w", st.Kind, err)
	}
	return nil
}

func sourceIndexer(kind workload.Kind, keys reload.Keys) client.IndexerFunc {
	return func(obj client.Object) []string {
		tpl := kind.PodTemplate(obj)
		var values []string
		for _, ref := range source.Refs(&tpl.Spec) {
			values = append(values, ref.ID.String())
		}
		// Runs under the informer's lock on every workload write: it reads the annotations
		// within their limits and compiles nothing.
		for k, named := range reload.ScanNamed(keys, obj.GetAnnotations(), tpl.Annotations) {
			for _, name := range named.Literal {
				values = append(values, source.ID{Kind: k, Name: name}.String())
			}
			if named.Patterns {
				values = append(values, anyOf(k))
			}
		}
		if ref, ok := kind.(workload.Referencing); ok && ref.TemplateRef(obj) != "" {
			values = append(values, workloadRef(ref.TemplateRef(obj)))
		}
		return values
	}
}
