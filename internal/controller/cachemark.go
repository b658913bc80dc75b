package controller

import "sigs.k8s.io/controller-runtime/pkg/client"

// FromCache reports whether o is a source as reloader's cache holds it (Transform has run),
// rather than a full object: the cache's own selectors already chose it, and its labels may
// have been dropped.
func FromCache(o client.Object) bool {
	_, ok := cached(o)
	return ok
}
