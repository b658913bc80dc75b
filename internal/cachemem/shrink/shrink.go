// Package shrink deletes from maps that a burst grows, and lets go of their memory once they
// are empty again.
package shrink

// Delete removes k from *m and, once *m is empty, replaces it by a new, empty map. A Go map
// keeps the size it grew to after deletes: one that the start-up burst filled (every
// workload queued, paced or baselined at once) would hold that memory for good.
func Delete[K comparable, V any](m *map[K]V, k K) {
	delete(*m, k)
	if len(*m) == 0 {
		*m = map[K]V{}
	}
}
