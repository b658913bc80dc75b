// Package intern makes the strings that repeat across cached objects share one copy. A
// decoded object holds its own copy of every string in it, yet a cluster's objects carry the
// same few namespaces, label keys and values, and annotation keys over and over: a chart
// stamps its labels on every object it makes.
package intern

import (
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Meta interns, in place, what repeats in o's metadata: its namespace, its label keys and
// values, and its annotation keys. Annotation values are left alone: reloader's records and
// tools' checksums are unique to each object, and would cost an entry each for no sharing.
func Meta(o metav1.Object) {
	o.SetNamespace(String(o.GetNamespace()))
	labels := o.GetLabels()
	for k, v := range labels {
		// Storing under an equal key also replaces the key: the map now holds the shared copy.
		labels[String(k)] = String(v)
	}
	annotations := o.GetAnnotations()
	for k, v := range annotations {
		annotations[String(k)] = v
	}
}

// MaxEntries bounds the table. When it is full the table starts over, so that values a
// cluster has stopped using (an old chart version, a deleted namespace) age out, and memory
// stays bounded whatever its objects carry; objects interned before keep their copies.
const MaxEntries = 1 << 14

// The table holds its copies strongly. (unique.Make would share a string only while its
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
