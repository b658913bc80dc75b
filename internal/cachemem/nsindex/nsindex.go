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
	"reflect"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Indexer is a client.FieldIndexer whose indexes answer a List with client.InNamespace and
// client.MatchingFields exactly as IndexField's do, and a List across namespaces by nothing.
// Made by New, it also answers the same lookups in place (Each).
type Indexer struct {
	Cache cache.Informers
	// stores are the informers' stores of the types indexed here, by the type of the items
	// of their lists (a struct type, such as appsv1.Deployment); nil: Each answers nothing.
	stores *sync.Map
}

var _ client.FieldIndexer = Indexer{}

// New returns an Indexer of c's informers that also answers lookups in place.
func New(c cache.Informers) Indexer { return Indexer{Cache: c, stores: &sync.Map{}} }

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
	i.keep(obj, informer)
	return nil
}

// Each calls fn with each object of the type of list's items in namespace ns (not "": a
// lookup within a namespace) whose index field holds value, as a List with
// client.InNamespace(ns), client.MatchingFields{field: value} and client.UnsafeDisableDeepCopy
// would find them, without that List's cost (a new object to name the informer, each item
// copied into the list): the objects are the cache's own and must not be modified. list only
// names the type: it may be a typed nil pointer, and is not filled. ok is false when the type has no such index here, or its
// first list is not in yet (read it with a List instead).
func (i Indexer) Each(list client.ObjectList, ns, field, value string, fn func(client.Object)) (ok bool) {
	return i.each(list, IndexName(field), ns+"/"+value, fn)
}

// Track keeps the store of obj's informer for EachIn, as IndexField keeps those it indexes.
func (i Indexer) Track(ctx context.Context, obj client.Object) error {
	informer, err := i.Cache.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	i.keep(obj, informer)
	return nil
}

// EachIn calls fn with each object of the type of list's items in namespace ns, as a List
// with client.InNamespace(ns) and client.UnsafeDisableDeepCopy would find them, in place (see
// Each); ok is false when the type's store is not kept here.
func (i Indexer) EachIn(list client.ObjectList, ns string, fn func(client.Object)) (ok bool) {
	return i.each(list, toolscache.NamespaceIndex, ns, fn)
}

// keep keeps the store of informer, the informer of obj's type.
func (i Indexer) keep(obj client.Object, informer cache.Informer) {
	if i.stores == nil {
		return
	}
	switch obj.(type) {
	case runtime.Unstructured, *metav1.PartialObjectMetadata:
		return // one Go type for every kind: not told apart by type
	}
	if store, ok := informer.(interface{ GetIndexer() toolscache.Indexer }); ok {
		i.stores.Store(reflect.TypeOf(obj).Elem(), indexedStore{store.GetIndexer(), informer.HasSynced})
	}
}

// each calls fn with each object of list's item type whose index holds value, in place.
func (i Indexer) each(list client.ObjectList, index, value string, fn func(client.Object)) (ok bool) {
	if i.stores == nil {
		return false
	}
	item, known := itemType(list)
	if !known {
		return false
	}
	s, found := i.stores.Load(item)
	if !found || !s.(indexedStore).synced() {
		// Before its first list is in, a List waits for it; so must a lookup.
		return false
	}
	objs, err := s.(indexedStore).ByIndex(index, value)
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

// indexedStore is an informer's store, and whether its first list is in.
type indexedStore struct {
	toolscache.Indexer
	synced func() bool
}

// itemTypes caches the type of a list type's items.
var itemTypes sync.Map

// itemType is the type of the items of list (a pointer to a struct with an Items slice).
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
		return nil, false // a list of pointers or of no struct: no store is kept by such a type
	}
	itemTypes.Store(t, f.Type.Elem())
	return f.Type.Elem(), true
}

// IndexName is the informer index controller-runtime's cache reader consults for field.
func IndexName(field string) string { return "field:" + field }

// allNamespaces is the reader's namespace for a List across namespaces.
const allNamespaces = "__all_namespaces"

// Reading is a client that reads Indexer's indexes in place where it can (Each, EachIn);
// every other read and every write goes to Client. It registers no index: in degraded mode
// an index registered on the cache would start an informer for a kind reloader may not watch.
type Reading struct {
	client.Client
	Indexes Indexer
}

// Each is Indexes.Each.
func (r Reading) Each(list client.ObjectList, ns, field, value string, fn func(client.Object)) bool {
	return r.Indexes.Each(list, ns, field, value, fn)
}

// EachIn is Indexes.EachIn.
func (r Reading) EachIn(list client.ObjectList, ns string, fn func(client.Object)) bool {
	return r.Indexes.EachIn(list, ns, fn)
}
