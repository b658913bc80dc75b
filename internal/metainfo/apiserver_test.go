package metainfo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/metainfo"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testenv/clustertest"
	"github.com/reloader-operator/reloader/internal/testutil"
)

var (
	cluster *testenv.Cluster
	admin   client.Client
)

func TestMain(m *testing.M) {
	clustertest.Main(m, testenv.Options{}, func(c *testenv.Cluster) (err error) {
		cluster = c
		admin, err = client.New(c.Config, client.Options{})
		return err
	})
}

// upstreamBuild and upstreamOptions are upstream's buildInfo and reloaderOptions documents,
// field for field, as its MetaInfo decodes them (read from stakater/Reloader's
// pkg/common/metainfo.go and common.go).
type upstreamBuild struct {
	GoVersion      string    `json:"goVersion"`
	ReleaseVersion string    `json:"releaseVersion"`
	CommitHash     string    `json:"commitHash"`
	CommitTime     time.Time `json:"commitTime"`
	Edition        string    `json:"edition"`
}

var upstreamOptionKeys = []string{"autoReloadAll", "configmapUpdateOnChangeAnnotation", "secretUpdateOnChangeAnnotation",
	"secretProviderClassUpdateOnChangeAnnotation", "reloaderAutoAnnotation", "ignoreResourceAnnotation",
	"configmapReloaderAutoAnnotation", "secretReloaderAutoAnnotation", "secretProviderClassReloaderAutoAnnotation",
	"configmapExcludeReloaderAnnotation", "secretExcludeReloaderAnnotation", "secretProviderClassExcludeReloaderAnnotation",
	"autoSearchAnnotation", "searchMatchAnnotation", "rolloutStrategyAnnotation", "pauseDeploymentAnnotation",
	"pauseDeploymentTimeAnnotation", "logFormat", "logLevel", "isArgoRollouts", "reloadStrategy", "reloadOnCreate",
	"reloadOnDelete", "syncAfterRestart", "enableHA", "enableCSIIntegration", "webhookUrl", "resourcesToIgnore",
	"workloadTypesToIgnore", "namespaceSelectors", "resourceSelectors", "namespacesToIgnore", "enablePProf", "pprofAddr"}

// strict decodes s into v, refusing fields v does not have.
func strict(t *testing.T, key, s string, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Errorf("%s does not decode as upstream's: %v (%s)", key, err, s)
	}
}

// A ConfigMap upstream wrote is taken over, and the one reloader writes decodes as upstream's
// does: upstream's keys in upstream's layout, reloader's own keys beside them.
func TestConfigMapInUpstreamsLayout(t *testing.T) {
	ctx := context.Background()
	ns := "meta-" + rand.String(5)
	testutil.Must(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	t.Cleanup(func() { _ = admin.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) })
	// As upstream leaves it (created with a plain create, then updated).
	old := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: metainfo.Name,
		Labels: map[string]string{metainfo.LabelKey: metainfo.LabelValue}},
		Data: map[string]string{"buildInfo": `{"goVersion":"go1.24","releaseVersion":"v1.4.21","commitHash":"x","commitTime":"0001-01-01T00:00:00Z","edition":"oss"}`,
			"reloaderOptions": `{"reloadStrategy":"annotations"}`, "deploymentInfo": `{"name":"reloader-reloader","namespace":"` + ns + `"}`}}
	testutil.Must(t, admin.Create(ctx, old))

	o := options.Default()
	fs := pflag.NewFlagSet("reloader", pflag.ContinueOnError)
	o.BindFlags(fs)
	testutil.Must(t, fs.Parse([]string{"--auto-reload-all", "--ignored-workload-types=jobs,cronjobs", "--namespace-selector=team:a",
		"--webhook-url=https://hooks.example/T000/s3cr3t", "--log-level=debug"}))
	p := &metainfo.Publisher{Client: admin, Namespace: ns, FieldOwner: "reloader", Log: testr.New(t),
		Deployment: metainfo.Deployment{Name: "reloader", Namespace: ns, Pod: "reloader-0"},
		Options:    metainfo.OptionsOf(o), Flags: o.Effective()}
	testutil.Must(t, p.Start(ctx))

	cm := &corev1.ConfigMap{}
	testutil.Must(t, admin.Get(ctx, client.ObjectKeyFromObject(old), cm))
	if cm.Labels[metainfo.LabelKey] != metainfo.LabelValue {
		t.Errorf("labels %v", cm.Labels)
	}
	for _, k := range []string{"buildInfo", "reloaderOptions", "deploymentInfo", "reloaderFlags", "instanceInfo"} {
		if cm.Data[k] == "" {
			t.Errorf("no %s", k)
		}
	}

	var build upstreamBuild
	strict(t, "buildInfo", strings.Replace(cm.Data["buildInfo"], `,"modified":true`, "", 1), &build)
	if !strings.HasPrefix(build.GoVersion, "go") || build.Edition != "oss" || build.ReleaseVersion == "v1.4.21" {
		t.Errorf("buildInfo %+v", build)
	}

	var opts map[string]any
	testutil.Must(t, json.Unmarshal([]byte(cm.Data["reloaderOptions"]), &opts))
	if len(opts) != len(upstreamOptionKeys) {
		t.Errorf("reloaderOptions has %d keys, upstream %d: %v", len(opts), len(upstreamOptionKeys), opts)
	}
	for _, k := range upstreamOptionKeys {
		if _, ok := opts[k]; !ok {
			t.Errorf("reloaderOptions lacks upstream's %s", k)
		}
	}
	var typed metainfo.ReloaderOptions
	strict(t, "reloaderOptions", cm.Data["reloaderOptions"], &typed)
	if !typed.AutoReloadAll || typed.ReloadStrategy != "env-vars" || typed.LogLevel != "debug" ||
		strings.Join(typed.WorkloadTypesToIgnore, ",") != "jobs,cronjobs" || strings.Join(typed.NamespaceSelectors, ",") != "team:a" ||
		typed.ReloaderAutoAnnotation != "reloader.stakater.com/auto" || typed.SecretUpdateOnChangeAnnotation != "secret.reloader.stakater.com/reload" ||
		typed.ResourcesToIgnore == nil {
		t.Errorf("reloaderOptions %+v", typed)
	}
	if typed.WebhookURL != "https://hooks.example" || strings.Contains(cm.Data["reloaderOptions"]+cm.Data["reloaderFlags"], "s3cr3t") {
		t.Errorf("the webhook URL's path is published: %q", typed.WebhookURL)
	}

	var dep metav1.ObjectMeta
	strict(t, "deploymentInfo", cm.Data["deploymentInfo"], &dep)
	if dep.Name != "reloader" || dep.Namespace != ns {
		t.Errorf("deploymentInfo %+v", dep)
	}
	var flags map[string]string
	testutil.Must(t, json.Unmarshal([]byte(cm.Data["reloaderFlags"]), &flags))
	if flags["auto-reload-all"] != "true" || flags["log-level"] != "debug" {
		t.Errorf("reloaderFlags %v", flags)
	}
	var inst metainfo.Instance
	strict(t, "instanceInfo", cm.Data["instanceInfo"], &inst)
	if inst.Pod != "reloader-0" || inst.StartedAt == "" {
		t.Errorf("instanceInfo %+v", inst)
	}
}

// Under upstream's metadata Role (get, list, watch, create and update on ConfigMaps in its
// namespace; no patch, so no server-side apply) the ConfigMap is still written: created when
// absent, updated in place when upstream left one, its other keys kept.
func TestWrittenUnderUpstreamsMetadataRole(t *testing.T) {
	ctx := context.Background()
	ns := "meta-" + rand.String(5)
	testutil.Must(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	t.Cleanup(func() { _ = admin.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) })
	name := "upstream-meta-" + rand.String(5)
	cfg, _, err := cluster.AddUser(name)
	testutil.Must(t, err)
	for _, o := range []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
				Verbs: []string{"list", "get", "watch", "create", "update"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}}},
	} {
		testutil.Must(t, admin.Create(ctx, o))
	}
	user, err := client.New(cfg, client.Options{})
	testutil.Must(t, err)
	p := &metainfo.Publisher{Client: user, Namespace: ns, FieldOwner: "reloader", Log: testr.New(t),
		Deployment: metainfo.Deployment{Name: "reloader-reloader", Namespace: ns, Pod: "reloader-0"},
		Options:    metainfo.OptionsOf(options.Default())}
	key := client.ObjectKey{Namespace: ns, Name: metainfo.Name}

	// The role really refuses the apply: without the fallback nothing would be written.
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}}
	if err := user.Patch(ctx, probe, client.Merge); !apierrors.IsForbidden(err) {
		t.Fatalf("the role grants patch (%v): the test would not show the fallback", err)
	}

	testutil.Must(t, p.Start(ctx))
	created := &corev1.ConfigMap{}
	testutil.Must(t, admin.Get(ctx, key, created))
	if created.Labels[metainfo.LabelKey] != metainfo.LabelValue || !strings.Contains(created.Data["deploymentInfo"], "reloader-reloader") {
		t.Fatalf("created ConfigMap %v %v", created.Labels, created.Data)
	}

	created.Data = map[string]string{"buildInfo": `{"releaseVersion":"v1.4.21"}`, "upstreamOnly": "kept"}
	testutil.Must(t, admin.Update(ctx, created))
	testutil.Must(t, p.Start(ctx))
	updated := &corev1.ConfigMap{}
	testutil.Must(t, admin.Get(ctx, key, updated))
	if updated.Data["upstreamOnly"] != "kept" || strings.Contains(updated.Data["buildInfo"], "v1.4.21") || updated.Data["instanceInfo"] == "" {
		t.Errorf("updated ConfigMap %v", updated.Data)
	}
}
