package lookup

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
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

// Stores keeps the stores of the cache's informers whose indexes the lookups read in place
// (Reading): a List through controller-runtime's cache makes a new object to name the
// informer and copies each object found into the list, on every source event and reconcile.
// A store is kept by the Go type of its objects, so unstructured and metadata-only types,
// one type for many kinds, are never kept.
type Stores struct {
	m sync.Map // the struct type of the items (appsv1.Deployment) -> keptStore
}

// keptStore is an informer's store, and whether its first list is in.
type keptStore struct {
	toolscache.Indexer
	synced func() bool
}

// Keep keeps the store of informer, the cache's informer of obj's type (nsindex.Indexer's
// Kept). An informer whose store can't be read (with --namespaces, one per namespace) is not
// kept: its lookups List.
func (s *Stores) Keep(obj client.Object, informer cache.Informer) {
	switch obj.(type) {
	case runtime.Unstructured, *metav1.PartialObjectMetadata:
		return
	}
	if inf, ok := informer.(interface{ GetIndexer() toolscache.Indexer }); ok {
		s.m.Store(reflect.TypeOf(obj).Elem(), keptStore{inf.GetIndexer(), informer.HasSynced})
	}
}

// each calls fn with each object of the type of list's items whose index holds value; ok
// is false when no such store or index is kept, or the store's first list is not in yet (a
// List, which waits for it, answers then).
func (s *Stores) each(list client.ObjectList, index, value string, fn func(client.Object)) (ok bool) {
	if s == nil {
		return false
	}
	item, known := itemType(list)
	if !known {
		return false
	}
	kept, found := s.m.Load(item)
	if !found || !kept.(keptStore).synced() {
		return false
	}
	objs, err := kept.(keptStore).ByIndex(index, value)
	if err != nil {
		return false // no such index (its only error): a List answers, or says why not
	}
	for _, o := range objs {
		if co, isObj := o.(client.Object); isObj {
			fn(co)
		}
	}
	return true
}

// itemTypes caches the type of a list type's items.
var itemTypes sync.Map

// itemType is the type of the items of list (a pointer to a struct with an Items slice of
// structs).
func itemType(list client.ObjectList) (reflect.Type, bool) {
	t := reflect.TypeOf(list)
	if it, ok := itemTypes.Load(t); ok {
		return it.(reflect.Type), true
	}
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil, false
	}
	f, ok := t.Elem().FieldByName("Items")
	if !ok || f.Type.Kind() != reflect.Slice || f.Type.Elem().Kind() != reflect.Struct {
		return nil, false
	}
	itemTypes.Store(t, f.Type.Elem())
	return f.Type.Elem(), true
}

// Reading is a client that reads the indexes of Stores in place where it can (IndexReader);
// every other read, and every write, goes to Client.
type Reading struct {
	client.Client
	Stores *Stores
}

// Each reads, in namespace ns (not "": a lookup within a namespace), the objects of list's
// item type whose index field holds value, as a List with client.InNamespace(ns),
// client.MatchingFields{field: value} and client.UnsafeDisableDeepCopy finds them; field is
// registered by nsindex.Indexer or controller-runtime's IndexField, whose keys this reads.
func (r Reading) Each(list client.ObjectList, ns, field, value string, fn func(client.Object)) bool {
	return r.Stores.each(list, "field:"+field, ns+"/"+value, fn)
}

// EachIn reads the objects of list's item type in namespace ns, as a List with
// client.InNamespace(ns) finds them (the cache's informers are indexed by namespace).
func (r Reading) EachIn(list client.ObjectList, ns string, fn func(client.Object)) bool {
	return r.Stores.each(list, toolscache.NamespaceIndex, ns, fn)
}
