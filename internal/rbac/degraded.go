package rbac

import (
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
)

// DegradedVerbs are what reloader needs at least on a workload kind to reload it without
// watching it (degraded mode, upstream's ClusterRole): it lists the namespace's workloads of
// the kind on each source change and reads each one it reconciles. Writes need patch besides.
var DegradedVerbs = []string{"get", "list"}

// WatchRule is the rule that turns a kind reloader reads in degraded mode into a watched one.
func WatchRule(group, resource string) rbacv1.PolicyRule { return rule(group, resource, "watch") }

// Format renders a rule as a user writes it in a Role, on one line:
// `apiGroups: ["apps"], resources: ["deployments"], verbs: ["watch"]`.
func Format(r rbacv1.PolicyRule) string {
	q := func(ss []string) string {
		out := make([]string, len(ss))
		for i, s := range ss {
			out[i] = fmt.Sprintf("%q", s)
		}
		return "[" + strings.Join(out, ", ") + "]"
	}
	return fmt.Sprintf("apiGroups: %s, resources: %s, verbs: %s", q(r.APIGroups), q(r.Resources), q(r.Verbs))
}
