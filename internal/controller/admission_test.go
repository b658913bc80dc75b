package controller_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/rbac"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// The package's API server runs OwnerReferencesPermissionEnforcement (main_test.go): setting
// blockOwnerDeletion on a Job owned by a CronJob needs update on cronjobs/finalizers.

const cronJobFinalizers = "cronjobs/finalizers"

// reloaderUser is a user with the RBAC internal/rbac declares for reloader watching ns, less
// the rules on the resources in without, plus the install key's Secret in ns (where a reloader
// without a namespace of its own keeps it).
func reloaderUser(t *testing.T, ns string, configure func(*options.Options), without ...string) *rest.Config {
	t.Helper()
	opts := options.Default()
	opts.Namespaces = []string{ns}
	if configure != nil {
		configure(&opts)
	}
	conf, err := options.Parse(opts)
	testutil.Must(t, err)
	// (The key is written by server-side apply: patch, as internal/rbac grants on it.)
	rules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create", "get", "patch"}}}
	for _, r := range rbac.For(conf, rbac.Platform{OpenShift: true}).Watched { // test/crds serves DeploymentConfigs
		if !slices.ContainsFunc(r.Resources, func(res string) bool { return slices.Contains(without, res) }) {
			rules = append(rules, r)
		}
	}
	user := "reloader-" + ns
	cfg, err := addUser(user)
	testutil.Must(t, err)
	create(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reloader"}, Rules: rules},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reloader"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "reloader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}})
	return cfg
}

// ownedJob is Job name in ns, owned by cj as the CronJob controller makes them: controller
// reference with blockOwnerDeletion.
func ownedJob(t *testing.T, cj *batchv1.CronJob, name string, annotations map[string]string, configMaps ...string) *batchv1.Job {
	t.Helper()
	j := job(cj.Namespace, name, annotations, configMaps...)
	j.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(get(t, cj), batchv1.SchemeGroupVersion.WithKind("CronJob"))}
	return j
}

// reloader dry-runs a replacement under the name the old Job still holds (admissible): this
// is a check only if the API server runs admission before it finds the name taken.
func TestDryRunAdmitsBeforeTheNameIsChecked(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cj := cronJob(ns, "nightly", nil)
	create(t, cj)
	j := ownedJob(t, cj, "nightly-1", nil)
	create(t, j)
	cfg := reloaderUser(t, ns, nil, cronJobFinalizers)
	as, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	testutil.Must(t, err)

	again := job(ns, j.Name, nil)
	again.OwnerReferences = j.OwnerReferences
	err = as.Create(context.Background(), again.DeepCopy(), client.DryRunAll)
	if !apierrors.IsForbidden(err) {
		t.Fatalf("dry run with blockOwnerDeletion, name taken: %v, want Forbidden from admission", err)
	}
	again.OwnerReferences[0].BlockOwnerDeletion = nil
	if err := as.Create(context.Background(), again.DeepCopy(), client.DryRunAll); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("dry run without blockOwnerDeletion, name taken: %v, want AlreadyExists", err)
	}
}

// A Job made by a CronJob (blockOwnerDeletion on its owner) reloads under reloader's own RBAC.
// Without update on cronjobs/finalizers the replacement is created without blockOwnerDeletion,
// the ownerReference kept; with the rights internal/rbac (and the chart) grant, as it was.
// Before, the Job was deleted and its replacement refused: the Job was lost.
func TestJobOwnedByCronJobIsReplacedUnderOwnerReferencesEnforcement(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		without []string
		block   bool
	}{
		{"without cronjobs/finalizers", []string{cronJobFinalizers}, false},
		{"with reloader's RBAC", nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ns := newNamespace(t)
			cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
			cj := cronJob(ns, "nightly", nil)
			create(t, cm, cj)
			j := ownedJob(t, cj, "nightly-1", map[string]string{auto: "true"}, "cfg")
			create(t, j)
			startReloaderAs(t, reloaderUser(t, ns, nil, tt.without...), ns)
			recorded(t, j)
			oldUID := get(t, j).UID

			changeConfig(t, cm, "v2")
			cur := replaced(t, j, oldUID)
			refs := cur.OwnerReferences
			if len(refs) != 1 || refs[0].UID != cj.UID || refs[0].Controller == nil || !*refs[0].Controller {
				t.Fatalf("ownerReferences of the replacement: %+v, want the CronJob's controller reference", refs)
			}
			if got := refs[0].BlockOwnerDeletion != nil && *refs[0].BlockOwnerDeletion; got != tt.block {
				t.Errorf("blockOwnerDeletion %v, want %v", got, tt.block)
			}
		})
	}
}

// When the API server would refuse the replacement, the Job is not deleted: it stays as it
// was, the refusal is on it as an Event, and no record is left. Before, the Job was deleted
// first and lost until creates were allowed again.
func TestRefusedReplacementKeepsTheJob(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm, j, oldUID, _ := recordedJob(t, ns)

	ctx := context.Background()
	lift := denyAll(t, ns, admissionv1.Create, "batch", "jobs", func() error {
		return k8s.Create(ctx, job(ns, fmt.Sprintf("probe-%d", time.Now().UnixNano()), nil), client.DryRunAll)
	})
	changeConfig(t, cm, "v2")
	eventuallyEvent(t, ns, "migrate", controller.ReasonReloadFail)
	handled(t, j, cm)
	cur := &batchv1.Job{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(j), cur); err != nil || cur.UID != oldUID {
		t.Fatalf("Job after a refused replacement: %v, UID %s, want the old one (%s) kept", err, cur.UID, oldUID)
	}
	var records appsv1.ControllerRevisionList
	testutil.Must(t, k8s.List(ctx, &records, client.InNamespace(ns), client.HasLabels{controller.ReplacementLabel}))
	if len(records.Items) > 0 {
		t.Errorf("%d records written for a replacement that never started", len(records.Items))
	}
	lift()
	replaced(t, j, oldUID)
}

// A CronJob that runs on reload starts its Job under reloader's RBAC without update on
// cronjobs/finalizers: without blockOwnerDeletion, owned by the CronJob. Before, the create
// was refused on every retry.
func TestRunOnReloadUnderOwnerReferencesEnforcement(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	cj := cronJob(ns, "nightly", map[string]string{auto: "true", reload.RunOnReloadAnnotation: "true"}, "cfg")
	create(t, cm, cj)
	startReloaderAs(t, reloaderUser(t, ns, nil, cronJobFinalizers), ns)
	recorded(t, cj)

	changeConfig(t, cm, "v2")
	testutil.Eventually(t, "a Job started from the CronJob", func() error {
		js := jobs(t, ns)
		if len(js) != 1 {
			return fmt.Errorf("%d Jobs", len(js))
		}
		if refs := js[0].OwnerReferences; len(refs) != 1 || refs[0].UID != get(t, cj).UID || ptr.Deref(refs[0].BlockOwnerDeletion, false) {
			return fmt.Errorf("ownerReferences %+v, want the CronJob's, not blocking", refs)
		}
		return nil
	})
}
