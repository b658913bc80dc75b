package installtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/deployments/render"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// install is one values set of the matrix and what it must do.
type install struct {
	name   string
	values map[string]any
	// kinds must reload in every watched namespace; ignored ones are created there too and
	// must be left alone.
	kinds, ignored []string
	// watched are the namespaces the install covers (the release's namespace when empty
	// and the install is namespaced); unwatched gets a Deployment that must be left alone.
	watched   []string
	unwatched string
	strategy  string
	// checkMetrics scrapes the leader's /metrics for the dashboard's and rules' metric names.
	checkMetrics bool
}

func reloaderValues(v map[string]any) map[string]any { return map[string]any{"reloader": v} }

var matrix = []install{
	// Jobs are reloaded by default, as upstream reloads them; reloader.reloadJobs=false leaves
	// them alone and grants no create or delete on Jobs, no ControllerRevision writes (csi).
	{name: "default", values: nil, kinds: builtinKinds, watched: []string{"default-apps"}},
	{name: "namespaced", values: reloaderValues(map[string]any{"watchGlobally": false, "reloadJobs": true}),
		kinds: builtinKinds, unwatched: "namespaced-other"},
	{name: "namespaces", values: reloaderValues(map[string]any{"watchGlobally": false, "namespaces": []any{"a", "b"}, "reloadJobs": true}),
		kinds: builtinKinds, watched: []string{"a", "b"}, unwatched: "c"},
	{name: "ha", values: reloaderValues(map[string]any{"enableHA": true, "deployment": map[string]any{"replicas": 2}, "reloadJobs": true}),
		kinds: builtinKinds, watched: []string{"ha-apps"}, checkMetrics: true},
	{name: "csi", values: reloaderValues(map[string]any{"enableCSIIntegration": true, "reloadJobs": false}),
		kinds: []string{Deployment, DaemonSet, StatefulSet, CronJob, CSI}, ignored: []string{Job}, watched: []string{"csi-apps"}},
	{name: "argo", values: reloaderValues(map[string]any{"isArgoRollouts": true, "reloadJobs": true}),
		kinds: append(slices.Clone(builtinKinds), Rollout), watched: []string{"argo-apps"}},
	// Not in the list, but the test cluster serves the DeploymentConfig API: this is
	// the install that may watch it.
	{name: "openshift", values: reloaderValues(map[string]any{"isOpenshift": true, "reloadJobs": true}),
		kinds: append(slices.Clone(builtinKinds), DeploymentConfig), watched: []string{"openshift-apps"}},
	{name: "no-jobs", values: reloaderValues(map[string]any{"ignoreJobs": true, "ignoreCronJobs": true}),
		kinds: []string{Deployment, DaemonSet, StatefulSet}, ignored: []string{Job, CronJob}, watched: []string{"no-jobs-apps"}},
	{name: "annotations", values: reloaderValues(map[string]any{"reloadStrategy": "annotations", "reloadJobs": true}),
		kinds: builtinKinds, watched: []string{"annotations-apps"}, strategy: "annotations"},
	// The admission policy in force: every reload reloader really writes passes it (a refusal
	// is a 403 in the audit log, and a reload that never lands).
	{name: "admission-policy", values: reloaderValues(map[string]any{"admissionPolicy": map[string]any{"enabled": true},
		"isArgoRollouts": true, "isOpenshift": true, "reloadJobs": true}),
		kinds: append(slices.Clone(builtinKinds), Rollout, DeploymentConfig), watched: []string{"policy-apps"}},
	{name: "admission-policy-annotations", values: reloaderValues(map[string]any{"admissionPolicy": map[string]any{"enabled": true},
		"reloadStrategy": "annotations", "reloadJobs": true}),
		kinds: builtinKinds, watched: []string{"policy-annotations-apps"}, strategy: "annotations"},
}

// TestChartInstallsAWorkingReloader installs the chart once per values set, one after the
// other (a cluster-wide install would also act on the others' namespaces), and runs reloader
// as the chart's Deployment would, as its ServiceAccount.
func TestChartInstallsAWorkingReloader(t *testing.T) {
	needCluster(t)
	for _, in := range matrix {
		t.Run(in.name, func(t *testing.T) { runInstall(t, in) })
	}
}

func runInstall(t *testing.T, in install) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := &installRun{t: t, ctx: ctx, in: in, releaseNS: "rel-" + in.name, release: "reloader-" + in.name,
		watched: in.watched, before: map[client.Object]string{}}
	if len(r.watched) == 0 {
		r.watched = []string{r.releaseNS}
	}
	for _, ns := range append([]string{r.releaseNS, in.unwatched}, r.watched...) {
		if ns != "" {
			ensureNamespace(t, ctx, ns)
		}
	}
	deploy, container := r.installChart()
	r.startReplicas(deploy, container)
	r.createWorkloads()
	r.changeSourcesAndSeeReloads()
	r.checkConfigStatus()
	r.checkUntouched()
	r.checkReplicas()
}

// installRun is one install of the matrix under way.
type installRun struct {
	t                  *testing.T
	ctx                context.Context
	in                 install
	releaseNS, release string
	watched            []string
	// refused is an error once the API server has refused a request of the install's
	// ServiceAccount: it ends every wait at once, since what it waits for may never come.
	refused func() error

	procs               []*reloaderProcess
	expected, untouched []client.Object
	before              map[client.Object]string // each workload's state before the change
}

// installChart renders the chart and applies it, and registers the audit check of the
// chart's ServiceAccount to run once every process has stopped (cleanups run last first).
func (r *installRun) installChart() (*appsv1.Deployment, corev1.Container) {
	objs, err := render.Chart(chartDir, r.in.values, r.release, r.releaseNS)
	if err != nil {
		r.t.Fatal(err)
	}
	// The CRD first, as Helm installs a CustomResourceDefinition before the rest: reloader looks
	// for its API at start.
	crds, err := render.CRDs(chartDir)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := applyAll(r.ctx, crds, ""); err != nil {
		r.t.Fatal(err)
	}
	eventually(r.t, r.ctx, "the ReloaderConfig API served", func() error { return nil }, func() error {
		return admin.List(r.ctx, &v1alpha1.ReloaderConfigList{})
	})
	if err := applyAll(r.ctx, objs, r.releaseNS); err != nil {
		r.t.Fatal(err)
	}
	deploy, container := reloaderContainer(r.t, objs)
	if deploy.Spec.Template.Spec.ServiceAccountName == "" {
		deploy.Spec.Template.Spec.ServiceAccountName = "default"
	}
	user := serviceAccountUser(r.releaseNS, deploy.Spec.Template.Spec.ServiceAccountName)
	r.t.Cleanup(func() { checkAudit(r.t, user) })
	r.refused = func() error { return refusals(user) }
	return deploy, container
}

// startReplicas runs one reloader per replica of the chart's Deployment, each with the env
// the kubelet would give its pod, authenticated by a token of the chart's ServiceAccount.
func (r *installRun) startReplicas(deploy *appsv1.Deployment, container corev1.Container) {
	t, sa := r.t, deploy.Spec.Template.Spec.ServiceAccountName
	kubeconfig, err := serviceAccountKubeconfig(r.ctx, t.TempDir(), r.releaseNS, sa)
	testutil.Must(t, err)
	replicas := 1
	if deploy.Spec.Replicas != nil {
		replicas = int(*deploy.Spec.Replicas)
	}
	if want := haReplicas(r.in); replicas != want {
		t.Fatalf("the chart renders %d replicas, want %d", replicas, want)
	}
	for i := range replicas {
		pod := fakePod{
			Name: fmt.Sprintf("%s-%d", deploy.Name, i), Namespace: r.releaseNS, UID: fmt.Sprintf("uid-%s-%d", r.in.name, i),
			NodeName: "node-0", ServiceAccount: sa, IP: "127.0.0.1",
			Labels: deploy.Spec.Template.Labels, Annotations: deploy.Spec.Template.Annotations,
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")},
		}
		env, err := containerEnv(container, pod)
		testutil.Must(t, err)
		r.procs = append(r.procs, startReloader(t, pod.Name, containerArgs(container, env), env, kubeconfig))
	}
	for _, p := range r.procs {
		testutil.Must(t, p.waitReady(r.ctx, r.refused))
	}
}

// createWorkloads creates the sources and a workload of each kind in each watched namespace
// (and one Deployment in the unwatched one), waits until reloader has recorded the ones it
// must reload, and notes the state of every workload.
func (r *installRun) createWorkloads() {
	t, ctx := r.t, r.ctx
	for _, ns := range r.watched {
		create(t, ctx, sources(ns)...)
		create(t, ctx, reloaderConfig(ns))
		if slices.Contains(r.in.kinds, CSI) {
			create(t, ctx, mountStatus(ns, "v1"))
		}
		for _, k := range r.in.kinds {
			r.expected = append(r.expected, create(t, ctx, newWorkload(k, ns))...)
		}
		for _, k := range r.in.ignored {
			r.untouched = append(r.untouched, create(t, ctx, newWorkload(k, ns))...)
		}
	}
	if r.in.unwatched != "" {
		create(t, ctx, sources(r.in.unwatched)...)
		r.untouched = append(r.untouched, create(t, ctx, newWorkload(Deployment, r.in.unwatched))...)
	}
	for _, w := range r.expected {
		eventually(t, ctx, describe(w)+" recorded by reloader", r.refused, func() error {
			if ok, err := recorded(ctx, w); err != nil || ok {
				return err
			}
			return fmt.Errorf("no %s annotation yet", reload.RecordAnnotation)
		})
	}
	for _, w := range append(slices.Clone(r.expected), r.untouched...) {
		var err error
		if r.before[w], err = state(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
}

// changeSourcesAndSeeReloads changes every source and waits until each workload that must
// reload has, the way the install's strategy writes it.
func (r *installRun) changeSourcesAndSeeReloads() {
	t, ctx := r.t, r.ctx
	for _, ns := range r.watched {
		testutil.Must(t, changeSources(ctx, ns, slices.Contains(r.in.kinds, CSI)))
	}
	if r.in.unwatched != "" {
		testutil.Must(t, changeSources(ctx, r.in.unwatched, false))
	}
	for _, w := range r.expected {
		eventually(t, ctx, describe(w)+" reloaded", r.refused, func() error {
			now, err := state(ctx, w) // a Job is not found between its delete and create
			if err != nil {
				return err
			}
			if now == r.before[w] {
				return fmt.Errorf("unchanged")
			}
			return reloadedBy(ctx, w, r.in.strategy)
		})
	}
}

// checkConfigStatus checks that the status of each watched namespace's ReloaderConfig shows
// its target resolved and reloaded by the ConfigMap it chooses.
func (r *installRun) checkConfigStatus() {
	for _, ns := range r.watched {
		cfg := reloaderConfig(ns)
		eventually(r.t, r.ctx, "the status of ReloaderConfig "+ns+"/"+cfg.Name, r.refused, func() error {
			if err := admin.Get(r.ctx, client.ObjectKeyFromObject(cfg), cfg); err != nil {
				return err
			}
			st := cfg.Status
			if ready := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); ready == nil || ready.Status != metav1.ConditionTrue {
				return fmt.Errorf("not Ready: %+v", st.Conditions)
			}
			if st.TargetCount != 1 || len(st.Targets) != 1 || st.Targets[0].LastReload == nil ||
				st.Targets[0].LastReload.Source != "configmap/"+configName {
				return fmt.Errorf("targets %+v", st.Targets)
			}
			return nil
		})
	}
}

// checkUntouched checks that ignored kinds and unwatched namespaces were left alone.
func (r *installRun) checkUntouched() {
	// Room for a late, wrong reload: every replica idle, its counters still.
	var scrapes []func() (testutil.Metrics, error)
	for _, p := range r.procs {
		scrapes = append(scrapes, func() (testutil.Metrics, error) {
			text, err := p.metrics()
			return testutil.ParseMetrics(text), err
		})
	}
	testutil.Settle(r.t, "the reloaders", testutil.Quiet(scrapes...))
	for _, w := range r.untouched {
		now, err := state(r.ctx, w)
		if err != nil {
			r.t.Fatal(err)
		}
		if now != r.before[w] {
			r.t.Errorf("%s changed, but this install must leave it alone", describe(w))
		}
		if ok, _ := recorded(r.ctx, w); ok {
			r.t.Errorf("%s was recorded, but this install must not watch it", describe(w))
		}
	}
}

// checkReplicas checks, from each replica's /metrics, that exactly one reloaded, at least
// once per workload; with HA, that it holds the Lease; and with checkMetrics, that it exposes
// every metric the dashboard and the rules query.
func (r *installRun) checkReplicas() {
	t := r.t
	reloaders, leader := 0, ""
	for _, p := range r.procs {
		text, err := p.metrics()
		testutil.Must(t, err)
		n := sample(text, "reloader_reload_executed_total", `success="true"`)
		t.Logf("%s: reloader_reload_executed_total{success=\"true\"} %v", p.name, n)
		if n == 0 {
			continue
		}
		reloaders, leader = reloaders+1, p.name
		if n < float64(len(r.expected)) {
			t.Errorf("%s reloaded %v times, want at least %d (one per workload)", p.name, n, len(r.expected))
		}
		if r.in.checkMetrics {
			checkDashboardMetrics(t, r.in, r.release, r.releaseNS, text)
		}
	}
	if reloaders != 1 {
		t.Errorf("%d replicas reloaded workloads, want exactly 1", reloaders)
	}
	if len(r.procs) > 1 {
		checkLeaseHolder(t, r.ctx, r.releaseNS, leader)
	}
}

// checkLeaseHolder checks that the replica that reloaded holds the Lease in the release
// namespace under its POD_NAME: the chart's downward API env is what names the replicas.
func checkLeaseHolder(t *testing.T, ctx context.Context, namespace, leader string) {
	t.Helper()
	var leases coordinationv1.LeaseList
	testutil.Must(t, admin.List(ctx, &leases, client.InNamespace(namespace)))
	var holders []string
	for _, l := range leases.Items {
		if l.Spec.HolderIdentity != nil {
			holders = append(holders, l.Name+" held by "+*l.Spec.HolderIdentity)
		}
	}
	if len(holders) != 1 || !strings.HasSuffix(holders[0], " held by "+leader) {
		t.Errorf("Leases in %s: %v; want one, held by %s, the replica that reloaded", namespace, holders, leader)
		return
	}
	t.Logf("Lease %s", holders[0])
}
