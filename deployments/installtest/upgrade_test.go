package installtest

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// upgradeCase is a release of upstream's chart and the values it was installed with; the
// upgrade onto our chart is given the same values, as `helm upgrade -f values.yaml` is.
type upgradeCase struct {
	name, release string
	values        map[string]any
	// valuesFile, under testdata, replaces values.
	valuesFile string
	// watched are the namespaces where a Deployment must reload (the release's when empty);
	// with unwatched, a Deployment in another namespace must be left alone.
	watched   []string
	unwatched bool
}

var upgrades = []upgradeCase{
	{name: "defaults", release: "reloader"},
	{name: "release-cfg", release: "cfg"},
	{name: "fullname-override", release: "reloader", values: map[string]any{"fullnameOverride": "reloader"}},
	{name: "name-override", release: "cfg", values: map[string]any{"nameOverride": "hot-reload"}},
	{name: "namespaced", release: "reloader", values: reloaderValues(map[string]any{"watchGlobally": false}), unwatched: true},
	// Upstream's Roles go to these namespaces: they must exist before the install.
	{name: "namespaces", release: "team",
		values:  reloaderValues(map[string]any{"watchGlobally": false, "namespaces": []any{"upgrade-a", "upgrade-b"}}),
		watched: []string{"upgrade-a", "upgrade-b"}, unwatched: true},
	// The optional objects, and selector labels through tpl, as upstream renders them.
	{name: "extras", release: "cfg", values: reloaderValues(map[string]any{
		"matchLabels":         map[string]any{"team": "{{ .Release.Name }}-ops"},
		"service":             map[string]any{"port": 9090},
		"podDisruptionBudget": map[string]any{"enabled": true, "minAvailable": 1},
		"netpol":              map[string]any{"enabled": true},
	})},
	{name: "ha", release: "reloader", values: reloaderValues(map[string]any{"enableHA": true, "deployment": map[string]any{"replicas": 2}})},
	// `helm show values` of upstream's chart 2.2.16 (Reloader v1.4.21) without its comments:
	// what users who copied the whole file pass. It pins stakater's image.
	{name: "upstream-values", release: "reloader", valuesFile: "upstream-v1.4.21-values.yaml"},
}

// upstreamChartDir is the stand-in for upstream's published chart (see its Chart.yaml).
func upstreamChartDir() string {
	return filepath.Join(repoRoot, "deployments", "installtest", "testdata", "upstream-v1.4.21")
}

// TestUpgradeFromUpstreamChart installs upstream's chart as a Helm release, upgrades it onto
// ours with the same values, and checks that the upgrade keeps what upstream's release
// gave (object names, the Deployment and its selector, the pod labels), installs the
// ReloaderConfig API, and that the Deployment it leaves runs a reloader that reloads. A
// rollback to upstream's revision must succeed too. One case at a time: each uninstalls its
// release, and starts without the CRD, as on a cluster that never had our chart.
func TestUpgradeFromUpstreamChart(t *testing.T) {
	needCluster(t)
	for _, c := range upgrades {
		t.Run(c.name, func(t *testing.T) { runUpgrade(t, c) })
	}
}

func runUpgrade(t *testing.T, c upgradeCase) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := "upgrade-" + c.name
	values := c.valuesMap(t)
	watched := c.watched
	if len(watched) == 0 {
		watched = []string{ns}
	}
	unwatched := ""
	if c.unwatched {
		unwatched = ns + "-other"
	}
	for _, n := range append([]string{ns, unwatched}, watched...) {
		if n != "" {
			ensureNamespace(t, ctx, n)
		}
	}
	removeReloaderConfigCRD(t, ctx)
	cfg := helmConfig(t, ns)

	inst := action.NewInstall(cfg)
	inst.ReleaseName, inst.Namespace = c.release, ns
	refreshCapabilities(t, cfg)
	installed, err := inst.Run(loadChart(t, upstreamChartDir()), values)
	if err != nil {
		t.Fatalf("helm install %s with upstream's chart: %v", c.release, err)
	}
	t.Cleanup(func() {
		if _, err := action.NewUninstall(cfg).Run(c.release); err != nil {
			t.Logf("helm uninstall %s: %v", c.release, err)
		}
	})
	before := recordUpstream(t, ctx, installed.Manifest, ns)

	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace = ns
	ours := loadChart(t, chartDir)
	refreshCapabilities(t, cfg)
	upgraded, err := upgrade.Run(c.release, ours, values)
	if err != nil {
		t.Fatalf("helm upgrade %s from upstream's chart onto ours, same values: %v", c.release, err)
	}
	if upgraded.Info.Status != release.StatusDeployed {
		t.Fatalf("helm upgrade %s: release status %s, want %s", c.release, upgraded.Info.Status, release.StatusDeployed)
	}

	before.checkKept(t, ctx, "after the upgrade")
	waitReloaderConfigAPI(t, ctx)
	deploy := checkOurPods(t, ctx, before.deploy, upgraded.Manifest, ours, values)
	checkSelectorsReachPods(t, ctx, upgraded.Manifest, ns)

	r := &installRun{t: t, ctx: ctx, releaseNS: ns, release: c.release, watched: watched, before: map[client.Object]string{},
		in: install{name: c.name, values: values, kinds: []string{Deployment}, watched: watched, unwatched: unwatched}}
	r.runUpgraded(deploy)

	rollback := action.NewRollback(cfg)
	rollback.Version = installed.Version
	if err := rollback.Run(c.release); err != nil {
		t.Fatalf("helm rollback %s to revision %d (upstream's chart): %v", c.release, installed.Version, err)
	}
	before.checkKept(t, ctx, "after the rollback to upstream's revision")
	before.checkContainers(t, ctx)
	history, err := action.NewHistory(cfg).Run(c.release)
	if err != nil {
		t.Fatal(err)
	}
	var revisions []string
	for _, h := range history {
		revisions = append(revisions, fmt.Sprintf("%d %s %s: %s", h.Version, h.Chart.Metadata.Name, h.Chart.Metadata.Version, h.Info.Status))
	}
	t.Logf("release %s/%s: %s", ns, c.release, strings.Join(revisions, "; "))
}

// valuesMap is the case's values, read from its file if it has one.
func (c upgradeCase) valuesMap(t *testing.T) map[string]any {
	t.Helper()
	if c.valuesFile == "" {
		return c.values
	}
	v, err := chartutil.ReadValuesFile(filepath.Join(repoRoot, "deployments", "installtest", "testdata", c.valuesFile))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func loadChart(t *testing.T, dir string) *chart.Chart {
	t.Helper()
	c, err := loader.Load(dir)
	if err != nil {
		t.Fatalf("load chart %s: %v", dir, err)
	}
	return c
}

// runUpgraded runs the upgraded Deployment's replicas, as installRun does for an install,
// and sees a Deployment reload; the processes are stopped before it returns, so that a
// later change of RBAC (the rollback) finds none of them running.
func (r *installRun) runUpgraded(live *unstructured.Unstructured) {
	deploy, container := reloaderContainer(r.t, []*unstructured.Unstructured{live})
	if deploy.Spec.Template.Spec.ServiceAccountName == "" {
		deploy.Spec.Template.Spec.ServiceAccountName = "default"
	}
	user := serviceAccountUser(r.releaseNS, deploy.Spec.Template.Spec.ServiceAccountName)
	r.t.Cleanup(func() { checkAudit(r.t, user) })
	r.refused = func() error { return refusals(user) }
	r.startReplicas(deploy, container)
	r.createWorkloads()
	r.changeSourcesAndSeeReloads()
	r.checkConfigStatus()
	r.checkUntouched()
	r.checkReplicas()
	for _, p := range r.procs {
		p.stop()
	}
}
