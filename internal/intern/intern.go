// Package intern makes the strings that repeat across cached objects share one copy. A
// decoded object holds its own copy of every string in it, yet a cluster's objects carry the
// same few namespaces, label keys and values, and annotation keys over and over: a chart
// stamps its labels on every object it makes.
package intern

import (
	"maps"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Meta interns what repeats in o's metadata: its namespace, its label set (objects with equal
// labels share one map, as a chart's objects do), and its annotation keys. Annotation values
// are left alone: reloader's records and tools' checksums are unique to each object, and
// would cost an entry each for no sharing.
//
// A shared label map is never written again, so it must be read only, as every object in an
// informer's cache must be; an object handed to Meta twice finds its own map in the table.
func Meta(o metav1.Object) {
	o.SetNamespace(String(o.GetNamespace()))
	if labels := o.GetLabels(); len(labels) > 0 {
		o.SetLabels(labelSet(labels))
	}
	annotations := o.GetAnnotations()
	for k, v := range annotations {
		// Storing under an equal key also replaces the key: the map now holds the shared copy.
		annotations[String(k)] = v
	}
}

// MaxEntries bounds the table of strings, MaxLabelSets that of label sets. When it is full the table starts over, so that values a
// cluster has stopped using (an old chart version, a deleted namespace) age out, and memory
// stays bounded whatever its objects carry; objects interned before keep their copies.
const (
	MaxEntries   = 1 << 14
	MaxLabelSets = 1 << 12
)

// The tables hold their copies strongly. (unique.Make would share a string only while its
// handle lives, and Value drops the handle: after the next collection a repeat of the string
// got a copy of its own again.)
var table struct {
	sync.Mutex
	m map[string]string
}

// String returns the shared copy of s.
func String(s string) string {
	if s == "" {
		return s
	}
	table.Lock()
	defer table.Unlock()
	if c, ok := table.m[s]; ok {
		return c
	}
	if table.m == nil || len(table.m) >= MaxEntries {
		table.m = make(map[string]string)
	}
	c := strings.Clone(s) // never a window on a larger buffer the decoder made
	table.m[c] = c
	return c
}

var labelSets struct {
	sync.Mutex
	m map[string]map[string]string // by the set's canonical form
}

// labelSet returns the shared map equal to m: a new one, of shared strings, the first time.
// m itself is never written: it may be a shared map already.
func labelSet(m map[string]string) map[string]string {
	keys := slices.Sorted(maps.Keys(m))
	var b strings.Builder
	for _, k := range keys {
		// NUL is in no label key or value.
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(m[k])
		b.WriteByte(0)
	}
	canonical := b.String()
	labelSets.Lock()
	defer labelSets.Unlock()
	if c, ok := labelSets.m[canonical]; ok {
		return c
	}
	if labelSets.m == nil || len(labelSets.m) >= MaxLabelSets {
		labelSets.m = make(map[string]map[string]string)
	}
	c := make(map[string]string, len(m))
	for _, k := range keys {
		c[String(k)] = String(m[k])
	}
	labelSets.m[canonical] = c
	return c
}
