package explain

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/workload"
)

// viewer binds user to a Role in ns that may only get and list the given resources.
func viewer(t *testing.T, ns, user string, rules ...rbacv1.PolicyRule) *rest.Config {
	t.Helper()
	for i := range rules {
		rules[i].Verbs = []string{"get", "list"}
	}
	create(t,
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user}, Rules: rules},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}})
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return cfg
}

var (
	workloadRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets", "daemonsets"}},
		{APIGroups: []string{"batch"}, Resources: []string{"cronjobs", "jobs"}},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}},
		{APIGroups: []string{"reloader.dev"}, Resources: []string{"reloaderconfigs"}},
		{APIGroups: []string{"apps.openshift.io"}, Resources: []string{"deploymentconfigs"}},
	}
	secretRule = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}}
)

// TestReadOnlyAccess: get and list are enough; without Secrets, explain still answers for
// ConfigMaps and says what it left out.
func TestReadOnlyAccess(t *testing.T) {
	ns := "readonly"
	namespace(t, ns)
	key := keySecret(t, ns)
	cfgBefore, cfg := configMap(ns, "cfg", "v1"), configMap(ns, "cfg", "v2")
	db := secret(ns, "db", "hunter2", nil)
	create(t, cfg, db, deployment(ns, "web", withRecord(map[string]string{"reloader.stakater.com/auto": "true"},
		reload.Record{"configmap/cfg": hash.ConfigMap(cfgBefore), "secret/db": hash.Secret(key, db)}),
		podSpec([]string{"cfg"}, []string{"db"})))
	ctx := context.Background()

	t.Run("get and list", func(t *testing.T) {
		e, err := New(ctx, viewer(t, ns, "viewer", append(workloadRules, secretRule)...), testConf(t), ns, ns)
		testutil.Must(t, err)
		w, err := e.Workload(ctx, workload.Deployment(), "web")
		testutil.Must(t, err)
		if w.Next.Action != ActionReload || len(w.Sources) != 2 || w.Sources[1].State != StateUnchanged || len(w.Notes) > 0 {
			t.Errorf("explained as %+v", w)
		}
		s, err := e.Source(ctx, "secret", "db")
		testutil.Must(t, err)
		if len(s.Workloads) != 1 || s.Hash != hash.Secret(key, db) || len(s.Notes) > 0 {
			t.Errorf("secret explained as %+v", s)
		}
	})

	t.Run("no secrets", func(t *testing.T) {
		e, err := New(ctx, viewer(t, ns, "cm-viewer", workloadRules...), testConf(t), ns, ns)
		testutil.Must(t, err)
		w, err := e.Workload(ctx, workload.Deployment(), "web")
		testutil.Must(t, err)
		if w.Next.Action != ActionReload || len(w.Sources) != 1 || len(w.Notes) != 1 || !strings.Contains(w.Notes[0], "Secrets are left out") {
			t.Errorf("explained as %+v", w)
		}
		if _, err := e.Source(ctx, "secret", "db"); err == nil {
			t.Error("explain of a Secret without access to Secrets did not fail")
		}
	})
}
