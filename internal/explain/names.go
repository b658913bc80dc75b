package explain

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/workload"
)

// sourceNames are the names accepted for each kind of source.
var sourceNames = map[source.Kind][]string{
	source.ConfigMap: {"configmap", "configmaps", "cm"},
	source.Secret:    {"secret", "secrets"},
}

// allKinds are the workload kinds reloader knows, whether or not this install reloads them.
func allKinds() []workload.Kind {
	return workload.Known()
}

// Target is what the command was asked about: a workload, or a source.
type Target struct {
	Workload workload.Kind
	Source   source.Kind
	Name     string
}

// ParseTarget reads "kind/name" as kubectl does: any case, singular, plural or short name,
// with an optional API group after a dot ("deployments.apps/web"). The names of workload
// kinds are those their descriptions give (workload.Names).
func ParseTarget(arg string) (Target, error) {
	return ParseTargetOf(workload.Known(), arg)
}

// ParseTargetOf is ParseTarget over the workload kinds of kinds.
func ParseTargetOf(kinds workload.Catalog, arg string) (Target, error) {
	kind, name, ok := strings.Cut(arg, "/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return Target{}, fmt.Errorf("%q: want <kind>/<name>, such as deployment/web or configmap/app-config", arg)
	}
	if problems := validation.IsDNS1123Subdomain(name); len(problems) > 0 {
		return Target{}, fmt.Errorf("%q: %q is not an object name: %s", arg, name, strings.Join(problems, "; "))
	}
	kind, _, _ = strings.Cut(strings.ToLower(kind), ".")
	if k, ok := kinds.Lookup(kind); ok {
		return Target{Workload: k, Name: name}, nil
	}
	for k, names := range sourceNames {
		for _, n := range names {
			if n == kind {
				return Target{Source: k, Name: name}, nil
			}
		}
	}
	var want []string
	for _, k := range kinds {
		want = append(want, workload.Names(k)[0])
	}
	for _, k := range source.Kinds {
		if names, ok := sourceNames[k]; ok {
			want = append(want, names[0])
		}
	}
	return Target{}, fmt.Errorf("%q: unknown kind %q; want one of %s", arg, kind, strings.Join(want, ", "))
}
