// Package intern makes the strings that repeat across cached objects share one copy. A
// decoded object holds its own copy of every string in it, yet a cluster's objects carry the
// same few namespaces, label keys and values, and annotation keys over and over: a chart
// stamps its labels on every object it makes.
package intern

import (
	"unique"

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

// String returns the one shared copy of s.
func String(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}
