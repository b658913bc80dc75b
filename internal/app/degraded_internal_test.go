package app

import (
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/reloader-operator/reloader/internal/rbac"
)

// TestDegradedMessage: the warning names each kind and one watch rule per API group, and fits
// an Event's note (1024 bytes) under upstream's ClusterRole, notes included.
func TestDegradedMessage(t *testing.T) {
	if (&degradedMode{}).message() != "" {
		t.Error("a message with every kind watched")
	}
	d := &degradedMode{kinds: []degradedKind{
		{"Deployment", rbac.WatchRule("apps", "deployments")}, {"StatefulSet", rbac.WatchRule("apps", "statefulsets")},
		{"DaemonSet", rbac.WatchRule("apps", "daemonsets")}, {"CronJob", rbac.WatchRule("batch", "cronjobs")},
		{"Job", rbac.WatchRule("batch", "jobs")},
	}, notes: []string{
		"CronJobs need " + rbac.Format(rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"cronjobs"}, Verbs: []string{"patch"}}),
		"Jobs need " + rbac.Format(rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"patch"}}),
		"Job reloads need " + rbac.Format(rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"controllerrevisions"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}}),
		"the meta-info ConfigMap can't be written (neither patch nor get, create and update on configmaps in reloader)",
	}}
	msg := d.message()
	for _, want := range []string{
		"Deployments, StatefulSets, DaemonSets, CronJobs, Jobs",
		`{apiGroups: ["apps"], resources: ["deployments", "statefulsets", "daemonsets"], verbs: ["watch"]}`,
		`{apiGroups: ["batch"], resources: ["cronjobs", "jobs"], verbs: ["watch"]}`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	if len(msg) > 1024 {
		t.Errorf("message of %d bytes; an Event's note holds 1024:\n%s", len(msg), msg)
	}
}
