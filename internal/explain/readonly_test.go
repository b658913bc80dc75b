package explain

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/hashkey"
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
		if w.Next.Action != ActionReload || len(w.Sources) != 2 || len(w.Notes) != 2 || !strings.Contains(w.Notes[0], "Secrets are left out") {
			t.Fatalf("explained as %+v", w)
		}
		if s := w.Sources[1]; s.Name != "db" || s.State != StateUnknown || s.Recorded != hash.Secret(key, db) {
			t.Errorf("secret/db, not readable, explained as %+v", s)
		}
		if _, err := e.Source(ctx, "secret", "db"); err == nil {
			t.Error("explain of a Secret without access to Secrets did not fail")
		}
	})
}

// viewOf binds user, in ns, to the rules that Kubernetes' view ClusterRole aggregates (the
// test control plane runs no aggregation controller to fill view itself), plus extra rules.
func viewOf(t *testing.T, ns, user string, extra ...rbacv1.PolicyRule) *rest.Config {
	t.Helper()
	cfg := viewer(t, ns, user, extra...)
	create(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-view"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:aggregate-to-view"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}})
	return cfg
}

// TestExplainWithoutTheKey: a user with view's rights, without access to reloader's hash key
// (as it should be: it is reloader's alone), gets the explanation without Secret hashes: the
// ConfigMap's change, the Secret's recorded hash, its state unknown and said so, with or
// without read access to the namespace's Secrets.
func TestExplainWithoutTheKey(t *testing.T) {
	ns, reloaderNS := "keyless", "keyless-reloader"
	namespace(t, ns)
	namespace(t, reloaderNS)
	key := keySecret(t, reloaderNS)
	cfgBefore := configMap(ns, "cfg", "v1")
	dbBefore, db := secret(ns, "db", "hunter1", nil), secret(ns, "db", "hunter2", nil)
	recorded := hash.Secret(key, dbBefore)
	create(t, configMap(ns, "cfg", "v2"), db, deployment(ns, "web", withRecord(map[string]string{"reloader.stakater.com/auto": "true"},
		reload.Record{"configmap/cfg": hash.ConfigMap(cfgBefore), "secret/db": recorded}),
		podSpec([]string{"cfg"}, []string{"db"})))
	ctx := context.Background()

	for _, tt := range []struct {
		name  string
		cfg   *rest.Config
		notes []string
	}{
		{"view", viewOf(t, ns, "view"), []string{"Secrets are left out", "secret/db: it can't be read here"}},
		{"view-secrets", viewOf(t, ns, "view-secrets", secretRule), []string{"you may not read reloader's Secret hash key", "secret/db: its current hash can't be computed"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, err := New(ctx, tt.cfg, testConf(t), ns, reloaderNS)
			testutil.Must(t, err)
			w, err := e.Workload(ctx, workload.Deployment(), "web")
			testutil.Must(t, err)
			if len(w.Sources) != 2 || w.Sources[0].State != StateChanged || w.Next.Action != ActionReload ||
				!strings.Contains(w.Next.Why, "Secrets are not counted") {
				t.Fatalf("explained as %+v", w)
			}
			if s := w.Sources[1]; s.Name != "db" || s.State != StateUnknown || s.Hash != unknown || s.Recorded != recorded {
				t.Errorf("secret/db explained as %+v", s)
			}
			for _, want := range tt.notes {
				if !slices.ContainsFunc(w.Notes, func(n string) bool { return strings.Contains(n, want) }) {
					t.Errorf("no note says %q: %q", want, w.Notes)
				}
			}
			golden(t, "keyless-"+tt.name, w)
		})
	}

	t.Run("source", func(t *testing.T) {
		e, err := New(ctx, viewOf(t, ns, "view-source", secretRule), testConf(t), ns, reloaderNS)
		testutil.Must(t, err)
		s, err := e.Source(ctx, "secret", "db")
		testutil.Must(t, err)
		if !s.Exists || s.Hash != unknown || len(s.Workloads) != 1 || s.Workloads[0].Name != "web" {
			t.Errorf("secret/db explained as %+v", s)
		}
	})
}

// TestBrokenKeyFails: a key reloader can't use is not taken for a missing one: explaining
// with it would be wrong, so explain fails and says why.
func TestBrokenKeyFails(t *testing.T) {
	ns := "broken-key"
	namespace(t, ns)
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hashkey.SecretName},
		Data: map[string][]byte{"key": []byte("short")}})
	_, err := New(context.Background(), cluster.Config, testConf(t), ns, ns)
	if err == nil || !strings.Contains(err.Error(), hashkey.SecretName) {
		t.Errorf("New with a broken key: %v, want an error naming the key", err)
	}
}
