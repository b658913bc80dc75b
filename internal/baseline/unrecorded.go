package baseline

import (
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// unrecordedIndex indexes a workload kind's cache by the namespace of each workload without
// record: the only workloads a source change is noted on. It is kept with the cache's store,
// under the same lock, so once the informer's first list is in it answers for exactly the
// objects a lookup of the cache would find; a workload that loses its record (a tenant may
// remove the annotation) is indexed again by the same update.
const unrecordedIndex = "reloader.unrecorded"

// indexUnrecorded adds unrecordedIndex to a workload informer, and returns what it answers:
// whether a namespace may hold a workload without record. Until the informer's first list is
// in, it answers yes: the lookup then waits for that list, as it did before the index. nil
// when the informer's store cannot be read (the caller then looks up every time).
func indexUnrecorded(informer any) (func(ns string) bool, error) {
	inf, ok := informer.(interface {
		AddIndexers(toolscache.Indexers) error
		GetIndexer() toolscache.Indexer
		HasSynced() bool
	})
	if !ok {
		return nil, nil
	}
	// Several Baselines (a test's managers) may watch one kind's informer.
	if _, added := inf.GetIndexer().GetIndexers()[unrecordedIndex]; !added {
		if err := inf.AddIndexers(toolscache.Indexers{unrecordedIndex: unrecordedNamespace}); err != nil {
			return nil, err
		}
	}
	indexer := inf.GetIndexer()
	return func(ns string) bool {
		if !inf.HasSynced() {
			return true
		}
		// ByIndex, not IndexKeys: the keys come sorted; the objects unsorted.
		objs, err := indexer.ByIndex(unrecordedIndex, ns)
		return err != nil || len(objs) > 0 // an index that can't answer: look up
	}, nil
}

// unrecordedNamespace is unrecordedIndex's function: the namespace of a workload without record.
func unrecordedNamespace(raw any) ([]string, error) {
	o, ok := raw.(client.Object)
	if !ok {
		return nil, fmt.Errorf("index %s: %T is no object", unrecordedIndex, raw)
	}
	if !unrecorded(o) {
		return nil, nil
	}
	return []string{o.GetNamespace()}, nil
}
