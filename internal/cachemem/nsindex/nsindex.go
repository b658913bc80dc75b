// Package nsindex registers field indexes on a controller-runtime cache that answer lookups
// within a namespace only.
//
// controller-runtime's IndexField stores every value twice: "<namespace>/<value>" for a List
// in a namespace, and "__all_namespaces/<value>" for a List across namespaces. Each distinct
// value is an index set (a map) of its own, so the second copy doubles the index's memory:
// 24,000 sets more at 12,000 sources used by 5,000 Deployments. reloader looks workloads up
// by source, and a source concerns its own namespace only, so it never lists across them.
package nsindex

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Indexer is a client.FieldIndexer whose indexes answer a List with client.InNamespace and
// client.MatchingFields exactly as IndexField's do, and a List across namespaces by nothing.
type Indexer struct {
	Cache cache.Informers
	// Kept, when set, is told each informer indexed, once its index is added (lookup.Stores
	// reads them in place).
	Kept func(obj client.Object, informer cache.Informer)
}

var _ client.FieldIndexer = Indexer{}

// IndexField registers extract under the name and key form controller-runtime's cache reader
// looks up ("field:<field>", "<namespace>/<value>"); a cluster-scoped object is indexed under
// the reader's all-namespaces form, as IndexField would, since that is its only form.
func (i Indexer) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	informer, err := i.Cache.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("index %s: %w", field, err)
	}
	if err := informer.AddIndexers(toolscache.Indexers{IndexName(field): func(raw any) ([]string, error) {
		o, ok := raw.(client.Object)
		if !ok {
			return nil, fmt.Errorf("index %s: %T is no object", field, raw)
		}
		ns := o.GetNamespace()
		if ns == "" {
			ns = allNamespaces
		}
		values := extract(o)
		keys := make([]string, len(values))
		for k, v := range values {
			keys[k] = ns + "/" + v
		}
		return keys, nil
	}}); err != nil {
		return err
	}
	if i.Kept != nil {
		i.Kept(obj, informer)
	}
	return nil
}

// IndexName is the informer index controller-runtime's cache reader consults for field.
func IndexName(field string) string { return "field:" + field }

// allNamespaces is the reader's namespace for a List across namespaces.
const allNamespaces = "__all_namespaces"
