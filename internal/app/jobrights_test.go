package app_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/app"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// TestJobReloadsWithoutTheirRightsAreNamed: when Jobs are reloaded but reloader's RBAC lacks
// the rights a Job's reload takes (the chart with reloader.reloadJobs=false, with Jobs
// put back in by hand), the check names each missing rule and the chart switch; with them,
// nothing; records unwatchable are reported so that their watch is left out.
func TestJobReloadsWithoutTheirRightsAreNamed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	k8s, err := client.New(restConfig, client.Options{})
	testutil.Must(t, err)
	const user = "job-rights-tester"
	as := rest.CopyConfig(restConfig)
	as.Impersonate = rest.ImpersonationConfig{UserName: user}
	conf := options.Config{}

	records, missing, err := app.CheckJobRights(ctx, as, conf)
	testutil.Must(t, err)
	for _, want := range []string{`resources: ["jobs"], verbs: ["create", "delete"]`, `resources: ["controllerrevisions"]`, "reloader.reloadJobs=true", "--ignored-workload-types=jobs"} {
		if !strings.Contains(missing, want) {
			t.Errorf("without rights: %q lacks %q", missing, want)
		}
	}
	if records {
		t.Error("records reported watchable without list and watch on controllerrevisions")
	}

	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create", "delete"}},
		{APIGroups: []string{"apps"}, Resources: []string{"controllerrevisions"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}}
	testutil.Must(t, k8s.Create(ctx, role))
	testutil.Must(t, k8s.Create(ctx, binding))
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), binding)
		_ = k8s.Delete(context.Background(), role)
	})
	testutil.Eventually(t, "the rights granted", func() error {
		records, missing, err := app.CheckJobRights(ctx, as, conf)
		if err != nil {
			return err
		}
		if missing != "" || !records {
			return fmt.Errorf("still missing: %q (records watchable: %v)", missing, records)
		}
		return nil
	})
}
