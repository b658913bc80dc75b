package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/testutil"
)

// In degraded mode (no watch on Deployments) a ConfigMap change finds its Deployments with a
// LIST sent to the API server, and a LIST can fail. Here it is refused (reloader's Role loses
// list on Deployments, as an API server that times out or throttles would fail it) when the
// ConfigMap changes; once reloader may list again, the Deployment reloads, with no further
// change. Before, the change reached no workload until its ConfigMap changed once more.
func TestDegradedLookupThatFailsIsMadeAgain(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	user := "reloader-" + ns
	cfg, err := addUser(user)
	testutil.Must(t, err)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reloader"}, Rules: degradedRules(true)}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reloader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "reloader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	d := deployment(ns, "web", map[string]string{auto: "true"}, podSpec("cfg"))
	create(t, role, binding, cm, d)

	startReloaderAs(t, cfg, ns)
	recorded(t, d)
	changes := templateChanges(t, d)
	listing := func(allowed bool) {
		update(t, role, func(r *rbacv1.Role) { r.Rules = degradedRules(allowed) })
		testutil.Eventually(t, fmt.Sprintf("list on Deployments allowed=%v", allowed), func() error {
			as, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
			if err != nil {
				return err
			}
			err = as.List(context.Background(), &appsv1.DeploymentList{}, client.InNamespace(ns))
			if (err == nil) != allowed {
				return fmt.Errorf("list: %v", err)
			}
			return nil
		})
	}
	listing(false)
	changeConfig(t, cm, "v2")
	// The subject: a span in which every lookup fails. (No reconcile comes of them to wait on:
	// the lookups fail before any workload is queued.)
	time.Sleep(3 * time.Second)
	if n := changes(); n != 0 {
		t.Fatalf("%d template changes while Deployments could not be listed", n)
	}
	since := time.Now()
	listing(true)
	testutil.Eventually(t, "the reload once the lookup works again", func() error {
		if n := changes(); n != 1 {
			return fmt.Errorf("%d template changes", n)
		}
		return nil
	})
	// Deployments are read without watch here: the reconcile that rolled web is the one to
	// wait for (a retry after it decides the same).
	handledSince(t, "Deployment", client.ObjectKeyFromObject(d), since)
	if n := changes(); n != 1 {
		t.Errorf("%d template changes, want 1", n)
	}
}

// degradedRules are a namespaced reloader's rules without watch on Deployments (degraded mode
// for that kind), and with or without list on them.
func degradedRules(listDeployments bool) []rbacv1.PolicyRule {
	read := []string{"get", "list", "watch"}
	write := append([]string{"patch", "update"}, read...)
	deployments := []string{"get", "patch", "update"}
	if listDeployments {
		deployments = append(deployments, "list")
	}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: read},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: deployments},
		{APIGroups: []string{"apps"}, Resources: []string{"statefulsets", "daemonsets"}, Verbs: write},
		{APIGroups: []string{"apps"}, Resources: []string{"controllerrevisions"}, Verbs: []string{"list", "watch", "create", "delete"}},
		{APIGroups: []string{"batch"}, Resources: []string{"cronjobs", "jobs"}, Verbs: append([]string{"create", "delete"}, write...)},
		{APIGroups: []string{"apps.openshift.io"}, Resources: []string{"deploymentconfigs"}, Verbs: write},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
	}
}
