// Package source names the kinds of objects whose changes reload workloads, and finds the
// references a pod template makes to them.
package source

import "strings"

// Kind is a kind of reload source.
type Kind string

// The source kinds reloader understands.
const (
	ConfigMap           Kind = "configmap"
	Secret              Kind = "secret"
	SecretProviderClass Kind = "secretproviderclass"
)

// Kinds lists every source kind in a stable order.
var Kinds = []Kind{ConfigMap, Secret, SecretProviderClass}

// EnvSuffix is the upper-case word that ends the env var names and the "type" of the
// last-reloaded-from annotation, as upstream Reloader spells them.
func (k Kind) EnvSuffix() string {
	return strings.ToUpper(string(k))
}

// Title is the kind as Kubernetes spells it, for Events and logs: "ConfigMap".
func (k Kind) Title() string {
	switch k {
	case ConfigMap:
		return "ConfigMap"
	case Secret:
		return "Secret"
	case SecretProviderClass:
		return "SecretProviderClass"
	}
	return string(k)
}

// ID identifies one source inside a workload's namespace.
type ID struct {
	Kind Kind
	Name string
}

// String is the form used in the field index and in recorded hashes: "configmap/app-config".
func (id ID) String() string {
	return string(id.Kind) + "/" + id.Name
}

// ParseID reverses ID.String.
func ParseID(s string) (ID, bool) {
	kind, name, ok := strings.Cut(s, "/")
	if !ok || name == "" {
		return ID{}, false
	}
	for _, k := range Kinds {
		if string(k) == kind {
			return ID{Kind: k, Name: name}, true
		}
	}
	return ID{}, false
}
