// Package intern makes the strings and label sets that repeat across cached objects share one
// copy. A decoded object holds its own copy of everything in it, yet a cluster's objects carry
// the same few namespaces, label keys and values, and annotation keys over and over: a chart
// stamps the same labels on every object it makes.
//
// The tables belong to one manager (Tables): internal/app makes them and hands them to the
// cache's transforms, so two managers in a process (tests, say) share nothing.
package intern

import (
	"reflect"
	"slices"
	"strings"
	"sync"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Tables are one manager's bounded tables of shared strings and label sets. A nil *Tables
// interns nothing: Meta leaves o as it is, String returns s.
type Tables struct {
	strs struct {
		sync.Mutex
		generations[string]
	}
	sets struct {
		sync.Mutex
		generations[map[string]string]
		// keys and canonical are reused, so that finding a known set allocates nothing.
		keys      []string
		canonical []byte
	}
}

// New returns empty tables, bounded by MaxStrings and MaxLabelSets.
func New() *Tables {
	t := &Tables{}
	t.strs.max, t.sets.max = MaxStrings, MaxLabelSets
	return t
}

// Meta interns what repeats in o's metadata: its namespace, its label set (objects with equal
// labels share one map), and its annotation keys. Annotation values are left alone: reloader's
// records and tools' checksums are unique to each object, and would cost an entry each for no
// sharing.
//
// A shared label map is never written again, so it must be read only, as every object in an
// informer's cache must be.
//
// Only what is not shared yet is written: an object the cache already holds may be read
// meanwhile by handlers without a copy (a map written while read is fatal), so Meta writes
// nothing to an object it interned before, as long as the tables still hold its strings.
// (The cache's transforms do not call it again on an object they transformed: past the
// tables' bounds an entry may have aged out.)
func (t *Tables) Meta(o metav1.Object) {
	if t == nil {
		return
	}
	if ns := o.GetNamespace(); ns != "" {
		if shared := t.String(ns); unsafe.StringData(shared) != unsafe.StringData(ns) {
			o.SetNamespace(shared)
		}
	}
	if labels := o.GetLabels(); len(labels) > 0 {
		if shared := t.labelSet(labels); !sameMap(shared, labels) {
			o.SetLabels(shared)
		}
	}
	annotations := o.GetAnnotations()
	for k, v := range annotations {
		// Storing under an equal key also replaces the key: the map now holds the shared copy.
		if shared := t.String(k); unsafe.StringData(shared) != unsafe.StringData(k) {
			annotations[shared] = v
		}
	}
}

// sameMap reports whether a and b are the same map, not only equal ones.
func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// MaxStrings and MaxLabelSets bound the tables: each holds at most that many entries in each
// of its two generations. When the newer is full it becomes the older, and an entry found
// only there moves back to the newer one: what is in use stays shared, and what a cluster has
// stopped using (an old chart version, a deleted namespace, a Job's own labels) ages out.
// The tables hold their entries strongly. (unique.Make shares a string only while its handle
// lives, and Value drops the handle: after the next collection a repeat got its own copy.)
const (
	MaxStrings   = 1 << 14
	MaxLabelSets = 1 << 12
)

// generations is a bounded table of two generations.
type generations[V any] struct {
	max        int
	new, older map[string]V
}

// get finds key, moving an entry of the older generation to the newer.
func (g *generations[V]) get(key string) (V, bool) {
	if v, ok := g.new[key]; ok {
		return v, true
	}
	v, ok := g.older[key]
	if ok {
		g.put(key, v)
	}
	return v, ok
}

// getBytes is get for a key being built: a lookup by string(key) allocates nothing, and
// only an entry moved to the newer generation copies the key.
func (g *generations[V]) getBytes(key []byte) (V, bool) {
	if v, ok := g.new[string(key)]; ok {
		return v, true
	}
	v, ok := g.older[string(key)]
	if ok {
		g.put(string(key), v)
	}
	return v, ok
}

func (g *generations[V]) put(key string, v V) {
	if len(g.new) >= g.max {
		g.older, g.new = g.new, nil
	}
	if g.new == nil {
		g.new = make(map[string]V)
	}
	g.new[key] = v
}

// String returns the shared copy of s.
func (t *Tables) String(s string) string {
	if s == "" || t == nil {
		return s
	}
	strs := &t.strs
	strs.Lock()
	defer strs.Unlock()
	if c, ok := strs.get(s); ok {
		return c
	}
	c := strings.Clone(s) // never a window on a larger buffer the decoder made
	strs.put(c, c)
	return c
}

// labelSet returns the shared map equal to m: a new one, of shared strings, the first time.
// m itself is never written: it may be a shared map already.
func (t *Tables) labelSet(m map[string]string) map[string]string {
	sets := &t.sets
	sets.Lock()
	defer sets.Unlock()
	sets.keys = sets.keys[:0]
	for k := range m {
		sets.keys = append(sets.keys, k)
	}
	slices.Sort(sets.keys)
	sets.canonical = sets.canonical[:0]
	for _, k := range sets.keys {
		// The API server admits no NUL in a label key or value.
		sets.canonical = append(append(sets.canonical, k...), 0)
		sets.canonical = append(append(sets.canonical, m[k]...), 0)
	}
	if c, ok := sets.getBytes(sets.canonical); ok {
		return c
	}
	c := make(map[string]string, len(m))
	for _, k := range sets.keys {
		c[t.String(k)] = t.String(m[k])
	}
	sets.put(string(sets.canonical), c)
	return c
}
