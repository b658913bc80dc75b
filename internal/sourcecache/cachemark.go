package sourcecache

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FromCache reports whether o is a source as reloader's cache holds it (Transform has run),
// rather than a full object: the cache's own selectors already chose it, and its labels may
// have been dropped.
func FromCache(o client.Object) bool {
	_, ok := cached(o)
	return ok
}

// Slim is a cached source object reduced to what its hashes need: its whole content's hashes,
// marked over the cap (no digests), so that a workload that reads some keys of it compares
// the whole content. A full object is returned as it is.
func Slim(o client.Object) client.Object {
	p, ok := cached(o)
	if !ok {
		return o
	}
	h, uid, _ := cachedHashes(p)
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Namespace: o.GetNamespace(), Name: o.GetName(), ResourceVersion: o.GetResourceVersion(),
		SelfLink: packed{hash: h, uidHash: uid, overCap: max(len(PackedDigests(p)), 1)}.marked(),
	}}
}
