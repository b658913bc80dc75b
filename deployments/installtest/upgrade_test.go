package installtest

import (
	"context"
	"fmt"
	"os"
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

	"github.com/reloader-operator/reloader/internal/testutil"
)

// upgradeCase is a release of upstream's chart and the values it was installed with; the
// upgrade onto our chart is given the same values, as `helm upgrade -f values.yaml` is.
type upgradeCase struct {
	name, release string
	values        map[string]any
	// valuesFile, under testdata, replaces values.
	valuesFile string
	// upstream is the stand-in for upstream's chart installed first, a directory under
	// testdata: upstreamChart2 when empty.
	upstream string
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
	// Upstream's chart 3.0.0-beta.1 with its own whole values file (enterprise.*, global.host,
	// an empty image.tag), and scoped, where its release namespace is not watched.
	{name: "chart3-values", release: "reloader", valuesFile: upstreamChart3Values, upstream: upstreamChart3},
	{name: "chart3-namespaces", release: "team", upstream: upstreamChart3,
		values:  reloaderValues(map[string]any{"watchGlobally": false, "namespaces": []any{"upgrade-c3-a"}}),
		watched: []string{"upgrade-c3-a"}, unwatched: true},
}

// The stand-ins for upstream's published charts (see their Chart.yaml), under testdata.
const (
	upstreamChart2 = "upstream-v1.4.21"
	upstreamChart3 = "upstream-chart-3.0.0-beta.1"
)

// upstreamChartDir is the stand-in for upstream's published chart 2.2.16.
func upstreamChartDir() string { return standInDir(upstreamChart2) }

func standInDir(name string) string {
	return filepath.Join(repoRoot, "deployments", "installtest", "testdata", name)
}

// loadStandIn loads the stand-in for upstream's chart under testdata/name. One without
// templates of its own (chart 3's) has its Chart.yaml and values.yaml, and the 2.2.16
// stand-in's templates, which render chart 3's differences from its version.
func loadStandIn(t *testing.T, name string) *chart.Chart {
	t.Helper()
	dir := standInDir(name)
	if _, err := os.Stat(filepath.Join(dir, "templates")); err == nil {
		return loadChart(t, dir)
	}
	c := loadChart(t, upstreamChartDir())
	md, err := chartutil.LoadChartfile(filepath.Join(dir, "Chart.yaml"))
	testutil.Must(t, err)
	values, err := chartutil.ReadValuesFile(filepath.Join(dir, "values.yaml"))
	testutil.Must(t, err)
	c.Metadata, c.Values = md, values
	testutil.Must(t, c.Validate())
	return c
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
	upstream := c.upstream
	if upstream == "" {
		upstream = upstreamChart2
	}
	u := installAndUpgrade(t, ctx, loadStandIn(t, upstream), c.release, ns, values)

	u.before.checkKept(t, ctx, "after the upgrade")
	waitReloaderConfigAPI(t, ctx)
	deploy := checkOurPods(t, ctx, u.before.deploy, u.upgraded.Manifest, u.ours, values)
	checkSelectorsReachPods(t, ctx, u.upgraded.Manifest, ns)

	r := &installRun{t: t, ctx: ctx, releaseNS: ns, release: c.release, watched: watched, before: map[client.Object]string{},
		in: install{name: c.name, values: values, kinds: []string{Deployment}, watched: watched, unwatched: unwatched}}
	r.runUpgraded(deploy)

	rollback := action.NewRollback(u.cfg)
	rollback.Version = u.installed.Version
	if err := rollback.Run(c.release); err != nil {
		t.Fatalf("helm rollback %s to revision %d (upstream's chart): %v", c.release, u.installed.Version, err)
	}
	u.before.checkKept(t, ctx, "after the rollback to upstream's revision")
	u.before.checkContainers(t, ctx)
	history, err := action.NewHistory(u.cfg).Run(c.release)
	testutil.Must(t, err)
	var revisions []string
	for _, h := range history {
		revisions = append(revisions, fmt.Sprintf("%d %s %s: %s", h.Version, h.Chart.Metadata.Name, h.Chart.Metadata.Version, h.Info.Status))
	}
	t.Logf("release %s/%s: %s", ns, c.release, strings.Join(revisions, "; "))
}

// upgradeRun is a release of upstream's chart upgraded onto ours.
type upgradeRun struct {
	cfg                 *action.Configuration
	installed, upgraded *release.Release
	before              *upstreamRelease
	ours                *chart.Chart
}

// installAndUpgrade installs upstream's chart (a stand-in for it) as release name in
// namespace ns, notes what it created, and upgrades it onto our chart with the same values;
// the release is uninstalled when the test ends.
func installAndUpgrade(t *testing.T, ctx context.Context, upstream *chart.Chart, name, ns string, values map[string]any) upgradeRun {
	t.Helper()
	u := upgradeRun{cfg: helmConfig(t, ns), ours: loadChart(t, chartDir)}
	inst := action.NewInstall(u.cfg)
	inst.ReleaseName, inst.Namespace = name, ns
	var err error
	if u.installed, err = inst.Run(upstream, values); err != nil {
		t.Fatalf("helm install %s with upstream's chart %s: %v", name, upstream.Metadata.Version, err)
	}
	t.Cleanup(func() {
		if _, err := action.NewUninstall(u.cfg).Run(name); err != nil {
			t.Logf("helm uninstall %s: %v", name, err)
		}
	})
	u.before = recordUpstream(t, ctx, u.installed.Manifest, ns)

	upgrade := action.NewUpgrade(u.cfg)
	upgrade.Namespace = ns
	if u.upgraded, err = upgrade.Run(name, u.ours, values); err != nil {
		t.Fatalf("helm upgrade %s from upstream's chart onto ours, same values: %v", name, err)
	}
	if u.upgraded.Info.Status != release.StatusDeployed {
		t.Fatalf("helm upgrade %s: release status %s, want %s", name, u.upgraded.Info.Status, release.StatusDeployed)
	}
	return u
}

// TestUpgradeTwoReleasesInOneCluster upgrades two namespaced releases of upstream's chart,
// one after the other, as a cluster with one per team has them: the ReloaderConfig CRD is
// cluster-wide, and the second upgrade must not fail on the one the first installed.
func TestUpgradeTwoReleasesInOneCluster(t *testing.T) {
	needCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	removeReloaderConfigCRD(t, ctx)
	values := reloaderValues(map[string]any{"watchGlobally": false})
	for _, ns := range []string{"upgrade-team-1", "upgrade-team-2"} {
		ensureNamespace(t, ctx, ns)
		u := installAndUpgrade(t, ctx, loadStandIn(t, upstreamChart2), "reloader", ns, values)
		u.before.checkKept(t, ctx, "after the upgrade in "+ns)
		waitReloaderConfigAPI(t, ctx)
	}
}

// valuesMap is the case's values, read from its file if it has one.
func (c upgradeCase) valuesMap(t *testing.T) map[string]any {
	t.Helper()
	if c.valuesFile == "" {
		return c.values
	}
	v, err := chartutil.ReadValuesFile(filepath.Join(repoRoot, "deployments", "installtest", "testdata", c.valuesFile))
	testutil.Must(t, err)
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
