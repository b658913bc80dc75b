package rbac

import (
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
)

// Grants flattens rules into sorted, unique "group/resource[name]:verb" atoms, so that two
// rule lists that grant the same permissions compare equal however their rules are split or
// ordered. A rule without resource names yields "group/resource:verb".
func Grants(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, n := range names {
					for _, v := range r.Verbs {
						out = append(out, atom(g, res, n, v))
					}
				}
			}
		}
		for _, u := range r.NonResourceURLs {
			for _, v := range r.Verbs {
				out = append(out, u+":"+v)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func atom(group, resource, name, verb string) string {
	var b strings.Builder
	b.WriteString(group)
	b.WriteByte('/')
	b.WriteString(resource)
	if name != "" {
		b.WriteString("[" + name + "]")
	}
	b.WriteString(":" + verb)
	return b.String()
}
