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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/deployments/render"
	"github.com/reloader-operator/reloader/internal/reload"
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
	{name: "default", values: nil, kinds: builtinKinds, watched: []string{"default-apps"}},
	{name: "namespaced", values: reloaderValues(map[string]any{"watchGlobally": false}),
		kinds: builtinKinds, unwatched: "namespaced-other"},
	{name: "namespaces", values: reloaderValues(map[string]any{"watchGlobally": false, "namespaces": []any{"a", "b"}}),
		kinds: builtinKinds, watched: []string{"a", "b"}, unwatched: "c"},
	{name: "ha", values: reloaderValues(map[string]any{"enableHA": true, "deployment": map[string]any{"replicas": 2}}),
		kinds: builtinKinds, watched: []string{"ha-apps"}, checkMetrics: true},
	{name: "csi", values: reloaderValues(map[string]any{"enableCSIIntegration": true}),
		kinds: append(slices.Clone(builtinKinds), CSI), watched: []string{"csi-apps"}},
	{name: "argo", values: reloaderValues(map[string]any{"isArgoRollouts": true}),
		kinds: append(slices.Clone(builtinKinds), Rollout), watched: []string{"argo-apps"}},
	// Not in the list, but the test cluster serves the DeploymentConfig API: this is
	// the install that may watch it.
	{name: "openshift", values: reloaderValues(map[string]any{"isOpenshift": true}),
		kinds: append(slices.Clone(builtinKinds), DeploymentConfig), watched: []string{"openshift-apps"}},
	{name: "no-jobs", values: reloaderValues(map[string]any{"ignoreJobs": true, "ignoreCronJobs": true}),
		kinds: []string{Deployment, DaemonSet, StatefulSet}, ignored: []string{Job, CronJob}, watched: []string{"no-jobs-apps"}},
	{name: "annotations", values: reloaderValues(map[string]any{"reloadStrategy": "annotations"}),
		kinds: builtinKinds, watched: []string{"annotations-apps"}, strategy: "annotations"},
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
	releaseNS, release := "rel-"+in.name, "reloader-"+in.name
	watched := in.watched
	if len(watched) == 0 {
		watched = []string{releaseNS}
	}
	for _, ns := range append([]string{releaseNS, in.unwatched}, watched...) {
		if ns != "" {
			ensureNamespace(t, ctx, ns)
		}
	}

	// 1. Render and apply.
	objs, err := render.Chart(chartDir, in.values, release, releaseNS)
	if err != nil {
		t.Fatal(err)
	}
	if err := applyAll(ctx, objs, releaseNS); err != nil {
		t.Fatal(err)
	}
	deploy, container := reloaderContainer(t, objs)
	sa := deploy.Spec.Template.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}

	// 5, registered first so that it runs after every process has stopped.
	user := serviceAccountUser(releaseNS, sa)
	t.Cleanup(func() { checkAudit(t, user) })
	// A refused request ends every wait at once: whatever it waits for may never come.
	refused := func() error { return refusals(user) }

	// 2. Credentials of the chart's ServiceAccount, env as the kubelet resolves it.
	kubeconfig, err := serviceAccountKubeconfig(ctx, t.TempDir(), releaseNS, sa)
	if err != nil {
		t.Fatal(err)
	}
	replicas := 1
	if deploy.Spec.Replicas != nil {
		replicas = int(*deploy.Spec.Replicas)
	}
	if haReplicas(in) != replicas {
		t.Fatalf("the chart renders %d replicas, want %d", replicas, haReplicas(in))
	}

	// 3. Run one process per replica.
	var procs []*reloaderProcess
	for i := range replicas {
		pod := fakePod{
			Name: fmt.Sprintf("%s-%d", deploy.Name, i), Namespace: releaseNS, UID: fmt.Sprintf("uid-%s-%d", in.name, i),
			NodeName: "node-0", ServiceAccount: sa, IP: "127.0.0.1",
			Labels: deploy.Spec.Template.Labels, Annotations: deploy.Spec.Template.Annotations,
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")},
		}
		env, err := containerEnv(container, pod)
		if err != nil {
			t.Fatal(err)
		}
		procs = append(procs, startReloader(t, pod.Name, containerArgs(container, env), env, kubeconfig))
	}
	for _, p := range procs {
		if err := p.waitReady(ctx, refused); err != nil {
			t.Fatal(err)
		}
	}

	// 4. Workloads, their first sight, a change, a reload of each.
	var expected, untouched []client.Object
	csi := slices.Contains(in.kinds, CSI)
	for _, ns := range watched {
		create(t, ctx, sources(ns)...)
		if csi {
			create(t, ctx, mountStatus(ns, "v1"))
		}
		for _, k := range in.kinds {
			w := newWorkload(k, ns)
			create(t, ctx, w)
			expected = append(expected, w)
		}
		for _, k := range in.ignored {
			w := newWorkload(k, ns)
			create(t, ctx, w)
			untouched = append(untouched, w)
		}
	}
	if in.unwatched != "" {
		create(t, ctx, sources(in.unwatched)...)
		w := newWorkload(Deployment, in.unwatched)
		create(t, ctx, w)
		untouched = append(untouched, w)
	}
	for _, w := range expected {
		eventually(t, ctx, describe(w)+" recorded by reloader", refused, func() error {
			if ok, err := recorded(ctx, w); err != nil || ok {
				return err
			}
			return fmt.Errorf("no %s annotation yet", reload.RecordAnnotation)
		})
	}
	before := map[client.Object]string{}
	for _, w := range append(slices.Clone(expected), untouched...) {
		if before[w], err = state(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range watched {
		if err := changeSources(ctx, ns, csi); err != nil {
			t.Fatal(err)
		}
	}
	if in.unwatched != "" {
		if err := changeSources(ctx, in.unwatched, false); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range expected {
		eventually(t, ctx, describe(w)+" reloaded", refused, func() error {
			now, err := state(ctx, w) // a Job is not found between its delete and create
			if err != nil {
				return err
			}
			if now == before[w] {
				return fmt.Errorf("unchanged")
			}
			return reloadedBy(ctx, w, in.strategy)
		})
	}
	time.Sleep(2 * time.Second) // room for a late, wrong reload of what must stay alone
	for _, w := range untouched {
		now, err := state(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		if now != before[w] {
			t.Errorf("%s changed, but this install must leave it alone", describe(w))
		}
		if ok, _ := recorded(ctx, w); ok {
			t.Errorf("%s was recorded, but this install must not watch it", describe(w))
		}
	}

	// Only one replica reloads; together they reload each workload.
	reloaders, leader := 0, ""
	for _, p := range procs {
		text, err := p.metrics()
		if err != nil {
			t.Fatal(err)
		}
		n := sample(text, "reloader_reload_executed_total", `success="true"`)
		t.Logf("%s: reloader_reload_executed_total{success=\"true\"} %v", p.name, n)
		if n > 0 {
			reloaders, leader = reloaders+1, p.name
		}
		if n > 0 && n < float64(len(expected)) {
			t.Errorf("%s reloaded %v times, want at least %d (one per workload)", p.name, n, len(expected))
		}
		if in.checkMetrics && n > 0 {
			checkDashboardMetrics(t, in, release, releaseNS, text)
		}
	}
	if reloaders != 1 {
		t.Errorf("%d replicas reloaded workloads, want exactly 1", reloaders)
	}
	if len(procs) > 1 {
		checkLeaseHolder(t, ctx, releaseNS, leader)
	}
}

// checkLeaseHolder checks that the replica that reloaded holds the Lease in the release
// namespace under its POD_NAME: the chart's downward API env is what names the replicas.
func checkLeaseHolder(t *testing.T, ctx context.Context, namespace, leader string) {
	t.Helper()
	var leases coordinationv1.LeaseList
	if err := admin.List(ctx, &leases, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
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

// haReplicas is the number of replicas the values set asks for.
func haReplicas(in install) int {
	r, _ := in.values["reloader"].(map[string]any)
	d, _ := r["deployment"].(map[string]any)
	if n, ok := d["replicas"].(int); ok {
		return n
	}
	return 1
}

// reloaderContainer is the chart's Deployment and its reloader container.
func reloaderContainer(t *testing.T, objs []*unstructured.Unstructured) (*appsv1.Deployment, corev1.Container) {
	t.Helper()
	deployments := render.OfKind(objs, "Deployment")
	if len(deployments) != 1 {
		t.Fatalf("the chart rendered %d Deployments, want 1", len(deployments))
	}
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(deployments[0].Object, &d); err != nil {
		t.Fatal(err)
	}
	cs := d.Spec.Template.Spec.Containers
	for _, c := range cs {
		if strings.Contains(c.Name, "reloader") {
			return &d, c
		}
	}
	if len(cs) != 1 {
		t.Fatalf("Deployment %s: no container named reloader among %d", d.Name, len(cs))
	}
	return &d, cs[0]
}

// checkAudit fails the test for every request of user the API server refused with 403,
// naming it so that the missing RBAC rule is evident.
func checkAudit(t *testing.T, user string) {
	settleAuditLog()
	events, err := requestsOf(user)
	if err != nil {
		t.Errorf("read audit log: %v", err)
		return
	}
	if len(events) == 0 {
		t.Errorf("no request of %s in the audit log: reloader did not run as the chart's ServiceAccount", user)
		return
	}
	if denied := forbidden(events); len(denied) > 0 {
		t.Errorf("%s was refused (403) %d kinds of request; the chart's RBAC misses:\n  %s", user, len(denied), strings.Join(denied, "\n  "))
		return
	}
	t.Logf("audit: %d requests of %s, none refused (%s)", len(events), user, summary(events))
}

func ensureNamespace(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := admin.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func create(t *testing.T, ctx context.Context, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatalf("create %s: %v", describe(o), err)
		}
	}
}

func describe(o client.Object) string {
	kind := fmt.Sprintf("%T", o)
	kind = kind[strings.LastIndex(kind, ".")+1:]
	return fmt.Sprintf("%s %s/%s", kind, o.GetNamespace(), o.GetName())
}

// eventually polls check until it returns nil, and fails the test with its last error; an
// error from abort fails it at once.
func eventually(t *testing.T, ctx context.Context, what string, abort, check func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 45*time.Second, true, func(context.Context) (bool, error) {
		if err := abort(); err != nil {
			return false, err
		}
		last = check()
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: %v (last: %v)", what, err, last)
	}
}
