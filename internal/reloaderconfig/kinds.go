package reloaderconfig

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

var groupName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

// KindAllowlist is --generic-target-kinds: the kinds a generic target may be of. The zero
// value allows none: a ReloaderConfig is a tenant's object, and a generic target is patched
// with reloader's rights, so an admin names the kinds tenants may have patched.
type KindAllowlist struct {
	// Any allows every namespaced kind ("*").
	Any   bool
	Kinds map[schema.GroupKind]bool
}

// ParseKindAllowlist reads the flag's entries: "group/Kind" ("apps/Deployment",
// "grafana.integreatly.org/Grafana"), "Kind" for the core group, or "*" for any kind.
func ParseKindAllowlist(entries []string) (KindAllowlist, error) {
	var a KindAllowlist
	for _, e := range entries {
		e = strings.TrimSpace(e)
		switch {
		case e == "":
			continue
		case e == "*":
			a.Any = true
			continue
		}
		group, kind, found := strings.Cut(e, "/")
		if !found {
			group, kind = "", e
		}
		if !kindName.MatchString(kind) || strings.Contains(kind, "/") || len(group) > 253 || (group != "" && !groupName.MatchString(group)) {
			return KindAllowlist{}, fmt.Errorf("%q is not group/Kind (such as apps/Deployment), Kind (core group) or *", e)
		}
		if a.Kinds == nil {
			a.Kinds = map[schema.GroupKind]bool{}
		}
		a.Kinds[schema.GroupKind{Group: group, Kind: kind}] = true
	}
	return a, nil
}

// Allows tells whether a generic target may be of kind gk.
func (a KindAllowlist) Allows(gk schema.GroupKind) bool {
	return a.Any || a.Kinds[gk]
}

// String lists the allowed kinds, for messages.
func (a KindAllowlist) String() string {
	if a.Any {
		return "*"
	}
	out := make([]string, 0, len(a.Kinds))
	for gk := range a.Kinds {
		out = append(out, gk.Group+"/"+gk.Kind)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}
