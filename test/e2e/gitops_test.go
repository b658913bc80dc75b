package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// Field managers of the GitOps tools this test stands in for: kubectl's client-side apply
// (Argo CD's default sync), Flux's kustomize-controller and Argo CD's server-side apply and
// server-side diff.
const (
	clientSideApplyManager = "kubectl-client-side-apply"
	fluxManager            = "kustomize-controller"
	argoManager            = "argocd-controller"
)

// gitopsManifest is a Deployment as it sits in Git: only the fields its author wrote, an env
// var and a pod-template annotation of its own beside those reloader adds. extraLabel, when
// set, stands for a later commit that changes the Deployment's labels and annotations but not
// its pod template.
func gitopsManifest(t *testing.T, ns, name string, evict bool, extraLabel string) []byte {
	t.Helper()
	restart := ""
	if evict {
		restart = fmt.Sprintf("\n    %s: %s", reload.RestartStrategyAnnotation, reload.RestartEvict)
	}
	labels, commit := "app: "+name, ""
	if extraLabel != "" {
		labels += ", release: " + extraLabel
		commit = "\n    example.com/commit: " + extraLabel
	}
	y := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: %[2]s
  labels: {%[4]s}
  annotations:
    reloader.stakater.com/auto: "true"%[3]s%[5]s
spec:
  replicas: 1
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
      annotations: {team: web}
    spec:
      containers:
        - name: app
          image: busybox
          env:
            - {name: LOG_LEVEL, value: info}
          envFrom:
            - configMapRef: {name: cfg}
`, name, ns, restart, labels, commit)
	j, err := yaml.YAMLToJSON([]byte(y))
	testutil.Must(t, err)
	return j
}

// withEnv is manifest with one more env var on its container.
func withEnv(manifest []byte, name, value string) []byte {
	var obj map[string]any
	_ = json.Unmarshal(manifest, &obj) // the test's own manifests are valid JSON
	spec := obj["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	c := spec["containers"].([]any)[0].(map[string]any)
	c["env"] = append(c["env"].([]any), map[string]any{"name": name, "value": value})
	out, _ := json.Marshal(obj)
	return out
}

// applier applies a manifest as one GitOps tool does, and says what it sent.
type applier struct {
	name  string
	apply func(ctx context.Context, cl client.Client, manifest []byte) (sent string, err error)
}

// applierOf is how the test's Deployment of that name is kept: "server-side" as Flux keeps
// it, the others as Argo CD does by default.
func applierOf(name string) applier {
	if name == "server-side" {
		return applier{"server-side apply as " + fluxManager, fluxApply}
	}
	return applier{"client-side apply", clientSideApply}
}

// clientSideApply is kubectl apply (and Argo CD's default sync): the object is created with
// the manifest in kubectl.kubernetes.io/last-applied-configuration; later applies send the
// three-way strategic merge patch between that annotation, the manifest and the live object,
// computed as kubectl computes it, and nothing when it is empty ("unchanged").
func clientSideApply(ctx context.Context, cl client.Client, manifest []byte) (string, error) {
	patch, _, live, err := threeWayPatch(ctx, cl, manifest)
	if apierrors.IsNotFound(err) {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(withLastApplied(manifest)); err != nil {
			return "", err
		}
		return "create", cl.Create(ctx, u, client.FieldOwner(clientSideApplyManager))
	}
	if err != nil || string(patch) == "{}" {
		return string(patch), err
	}
	return string(patch), cl.Patch(ctx, live, client.RawPatch(types.StrategicMergePatchType, patch), client.FieldOwner(clientSideApplyManager))
}

// threeWayPatch is the patch kubectl apply would send for manifest, with the live object it
// was computed against (as JSON, and decoded).
func threeWayPatch(ctx context.Context, cl client.Client, manifest []byte) ([]byte, []byte, *appsv1.Deployment, error) {
	var m struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(manifest, &m); err != nil {
		return nil, nil, nil, err
	}
	live := &appsv1.Deployment{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: m.Metadata.Namespace, Name: m.Metadata.Name}, live); err != nil {
		return nil, nil, nil, err
	}
	live.APIVersion, live.Kind = "apps/v1", "Deployment" // as the API server sends it to kubectl
	current, err := json.Marshal(live)
	if err != nil {
		return nil, nil, nil, err
	}
	meta, err := strategicpatch.NewPatchMetaFromStruct(&appsv1.Deployment{})
	if err != nil {
		return nil, nil, nil, err
	}
	patch, err := strategicpatch.CreateThreeWayMergePatch([]byte(live.Annotations[corev1.LastAppliedConfigAnnotation]), withLastApplied(manifest), current, meta, true)
	return patch, current, live, err
}

// legacyDiff is Argo CD's default comparison of a client-side applied object with its
// manifest: the three-way patch a sync would send, applied to the live object, predicts the
// object after the sync; the app is Synced when that equals the live object. It returns what
// would change, or "" when nothing would.
func legacyDiff(ctx context.Context, cl client.Client, manifest []byte) (string, error) {
	patch, current, live, err := threeWayPatch(ctx, cl, manifest)
	if err != nil {
		return "", err
	}
	predicted, err := strategicpatch.StrategicMergePatch(current, patch, &appsv1.Deployment{})
	if err != nil {
		return "", err
	}
	p := &appsv1.Deployment{}
	if err := json.Unmarshal(predicted, p); err != nil {
		return "", err
	}
	if equality.Semantic.DeepEqual(p.Spec, live.Spec) && equality.Semantic.DeepEqual(p.Annotations, live.Annotations) &&
		equality.Semantic.DeepEqual(p.Labels, live.Labels) {
		return "", nil
	}
	return fmt.Sprintf("patch %s turns the live object into %+v", patch, p), nil
}

// withLastApplied is the manifest carrying itself in the last-applied annotation, as kubectl
// sends it.
func withLastApplied(manifest []byte) []byte {
	var obj map[string]any
	_ = json.Unmarshal(manifest, &obj) // the test's own manifests are valid JSON
	meta := obj["metadata"].(map[string]any)
	ann, _ := meta["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
	}
	ann[corev1.LastAppliedConfigAnnotation] = string(manifest)
	meta["annotations"] = ann
	out, _ := json.Marshal(obj)
	return out
}

// fluxApply is Flux's kustomize-controller: server-side apply of the manifest under its
// field manager, taking over conflicting fields (--force-conflicts).
func fluxApply(ctx context.Context, cl client.Client, manifest []byte) (string, error) {
	_, err := serverSideApply(ctx, cl, manifest, fluxManager, false)
	return "apply", err
}

// serverSideApply applies manifest under manager with force, or only dry-runs it, and returns
// the object the API server answered with.
func serverSideApply(ctx context.Context, cl client.Client, manifest []byte, manager string, dryRun bool) (*appsv1.Deployment, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(manifest); err != nil {
		return nil, err
	}
	opts := []client.ApplyOption{client.FieldOwner(manager), client.ForceOwnership}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	if err := cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), opts...); err != nil {
		return nil, err
	}
	d := &appsv1.Deployment{}
	return d, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d)
}

// A Deployment kept by a GitOps tool, reloaded by reloader, then synced again from the same
// manifest, by client-side apply (Argo CD's default) and by server-side apply as Flux does,
// for the env-vars and annotations strategies and the evict restart: the sync reverts none of
// reloader's fields and rolls nothing, and a server-side dry-run of the manifest (kubectl
// diff --server-side, Argo CD's server-side diff, Flux's drift check) finds no difference.
// The controls, that a revert shows when there is one: a replace (Argo CD's Replace=true)
// drops reloader's fields and rolls, and a commit that pins reloader's env var sets Git's
// value and rolls.
func TestGitOpsSyncKeepsReloads(t *testing.T) {
	t.Parallel() // its own control plane and reloaders
	bin := buildReloader(t)
	// The cluster lives as long as the test; each case has its own time from when it runs
	// (parallel cases wait for a free slot first, which a budget set here would count).
	root, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	startCtx, cancelStart := context.WithTimeout(root, 3*time.Minute)
	defer cancelStart()
	cluster, cl := startCluster(t, startCtx, testenv.Options{Rollouts: true, Nodes: 1})
	out := outputLoggedOnFailure(t)

	for _, tc := range []struct {
		name  string
		args  []string
		evict bool
	}{
		{name: "env-vars"},
		{name: "annotations", args: []string{"--reload-strategy=annotations"}},
		{name: "evict", args: []string{"--enable-evict-strategy"}, evict: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // a reloader of its own, watching its namespace only
			ctx, cancel := context.WithTimeout(root, 3*time.Minute)
			t.Cleanup(cancel)
			ns := "gitops-" + tc.name
			testutil.Must(t, cluster.EnsureNamespace(ctx, cl, ns))
			_, addr := startReady(t, ctx, bin, cluster.Kubeconfig, ns, tc.name+" | ", out,
				append([]string{"--namespaces=" + ns}, tc.args...)...)
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}, Data: map[string]string{"k": "v0"}}
			testutil.Must(t, cl.Create(ctx, cm))

			names := []string{"client-side", "server-side"}
			if !tc.evict {
				names = append(names, "replaced")
			}
			if tc.name == "env-vars" {
				names = append(names, "pinned")
			}
			for _, name := range names { // "replaced" is created as Argo CD creates it
				_, err := applierOf(name).apply(ctx, cl, gitopsManifest(t, ns, name, tc.evict, ""))
				testutil.Must(t, err)
			}
			for _, name := range names {
				d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
				waitRecorded(t, ctx, cl, d)
				waitRolledOut(t, ctx, cl, d, "1")
			}

			// The ConfigMap changes: every Deployment reloads.
			cm.Data["k"] = "v1"
			testutil.Must(t, cl.Update(ctx, cm))
			for _, name := range names {
				d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
				if tc.evict {
					testutil.Eventually(t, name+" restarted by eviction", testutil.Cond(func() (bool, error) {
						restarted, err := hasEvent(ctx, cl, ns, name, controller.ReasonRestarted)
						if err != nil || !restarted {
							return false, err
						}
						err = cl.Get(ctx, client.ObjectKeyFromObject(d), d)
						_, evicting := d.Annotations[reload.EvictingAnnotation]
						return err == nil && !evicting, err
					}))
					waitRolledOut(t, ctx, cl, d, "1")
					continue
				}
				testutil.Eventually(t, name+" reloaded", testutil.Cond(func() (bool, error) {
					err := cl.Get(ctx, client.ObjectKeyFromObject(d), d)
					return err == nil && reloaderField(tc.name, d) != "", err
				}))
				waitRolledOut(t, ctx, cl, d, "2")
			}
			settled(t, tc.name+" reloads", addr)

			// The sync, twice: the same manifest, then a commit that changes the Deployment's
			// labels but not its pod template.
			before := map[string]snapshot{}
			for _, name := range names[:2] {
				before[name] = snap(t, ctx, cl, ns, name, tc.name)
			}
			reloads := scrape(t, addr)[reloadsSeries]
			diff, err := legacyDiff(ctx, cl, gitopsManifest(t, ns, "client-side", tc.evict, ""))
			testutil.Must(t, err)
			if diff != "" {
				t.Errorf("client-side: Argo CD's default diff after the reload is not empty (OutOfSync): %s", diff)
			}
			for _, name := range names[:2] {
				sent, err := applierOf(name).apply(ctx, cl, gitopsManifest(t, ns, name, tc.evict, ""))
				testutil.Must(t, err)
				t.Logf("%s: the sync of the unchanged manifest sent %s", name, sent)
			}
			settled(t, tc.name+" after the unchanged sync", addr)
			m0 := scrape(t, addr)
			for _, name := range names[:2] {
				sent, err := applierOf(name).apply(ctx, cl, gitopsManifest(t, ns, name, tc.evict, "r2"))
				testutil.Must(t, err)
				t.Logf("%s: the sync of the new commit sent %s", name, sent)
			}
			// Positive signal: reloader reconciled both Deployments after the sync's writes (an
			// annotation change lets a workload through to its reconcile; labels and kubectl's
			// last-applied copy are not even cached).
			testutil.Eventually(t, "reloader reconciling the synced Deployments", testutil.Cond(func() (bool, error) {
				m := scrape(t, addr)
				return workloadReconciles(m) >= workloadReconciles(m0)+2, nil
			}))
			settled(t, tc.name+" after the sync", addr)
			if r := scrape(t, addr)[reloadsSeries]; r != reloads {
				t.Errorf("reloads went from %g to %g over the syncs; want none", reloads, r)
			}
			for _, name := range names[:2] {
				d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
				waitObserved(t, ctx, cl, d)
				after := snap(t, ctx, cl, ns, name, tc.name)
				b := before[name]
				if after.labels["release"] != "r2" {
					t.Errorf("%s: the sync did not land: labels %v", name, after.labels)
				}
				// (a) Nothing of reloader's reverted, and the manifest's own fields kept.
				if after.field != b.field || after.record != b.record {
					t.Errorf("%s (%s): reloader's fields reverted by the sync: %q, record %q; were %q, record %q", name, applierOf(name).name, after.field, after.record, b.field, b.record)
				}
				if envValue(after.spec.Template.Spec, "LOG_LEVEL") != "info" || after.spec.Template.Annotations["team"] != "web" {
					t.Errorf("%s: the manifest's own env var or template annotation lost: %+v", name, after.spec.Template)
				}
				// (b) No second rollout: the same spec, revision and ReplicaSets. (The generation
				// of a Deployment moves with its annotations, so the commit moved it.)
				if !equality.Semantic.DeepEqual(after.spec, b.spec) {
					t.Errorf("%s (%s): the sync changed the spec:\n before %+v\n after  %+v", name, applierOf(name).name, b.spec.Template, after.spec.Template)
				}
				if after.revision != b.revision || after.replicaSets != b.replicaSets {
					t.Errorf("%s (%s): revision %s -> %s, ReplicaSets %d -> %d; want both unchanged",
						name, applierOf(name).name, b.revision, after.revision, b.replicaSets, after.replicaSets)
				}
				if !slices.Contains(after.managers, controller.FieldOwner+"/Update") {
					t.Errorf("%s: no managedFields entry of %s (Update): %v", name, controller.FieldOwner, after.managers)
				}
				// (c) The diff is empty: a server-side dry-run of the manifest, by Flux's
				// field manager and by Argo CD's, changes nothing of the live object; for the
				// client-side applied one, kubectl's three-way patch is empty too.
				manifest := gitopsManifest(t, ns, name, tc.evict, "r2")
				for _, manager := range []string{fluxManager, argoManager} {
					dry, err := serverSideApply(ctx, cl, manifest, manager, true)
					testutil.Must(t, err)
					if !equality.Semantic.DeepEqual(dry.Spec, after.spec) {
						t.Errorf("%s: server-side dry-run as %s changes the spec:\n dry-run %+v\n live    %+v", name, manager, dry.Spec.Template, after.spec.Template)
					}
					if !equality.Semantic.DeepEqual(dry.Annotations, after.annotations) || !equality.Semantic.DeepEqual(dry.Labels, after.labels) {
						t.Errorf("%s: server-side dry-run as %s changes the metadata: annotations %v, labels %v; live %v, %v", name, manager, dry.Annotations, dry.Labels, after.annotations, after.labels)
					}
				}
				if name == "client-side" {
					diff, err := legacyDiff(ctx, cl, manifest)
					testutil.Must(t, err)
					if diff != "" {
						t.Errorf("%s: Argo CD's default diff after the sync is not empty (OutOfSync): %s", name, diff)
					}
				}
				t.Logf("%s (%s): kept %q, record %q, revision %s, %d ReplicaSets, managers %v", name, applierOf(name).name, after.field, after.record, after.revision, after.replicaSets, after.managers)
			}
			if tc.evict {
				return
			}

			// Argo CD's Replace=true (kubectl replace): the manifest replaces the object, and
			// with it reloader's fields: the template goes back to Git's, a rollout.
			b := snap(t, ctx, cl, ns, "replaced", tc.name)
			u := &unstructured.Unstructured{}
			testutil.Must(t, u.UnmarshalJSON(gitopsManifest(t, ns, "replaced", false, "")))
			testutil.Must(t, cl.Update(ctx, u, client.FieldOwner(clientSideApplyManager)))
			replaced := &appsv1.Deployment{}
			testutil.Must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, replaced))
			if f, rec := reloaderField(tc.name, replaced), replaced.Annotations[reload.RecordAnnotation]; f != "" || rec != "" {
				t.Errorf("replace: reloader's field %q and record %q are still there; want both gone", f, rec)
			}
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "replaced"}}
			testutil.Eventually(t, "the replace rolled out", testutil.Cond(func() (bool, error) {
				err := cl.Get(ctx, client.ObjectKeyFromObject(d), d)
				rev, _ := strconv.Atoi(d.Annotations[revisionAnnotation])
				was, _ := strconv.Atoi(b.revision)
				return err == nil && rev > was, err
			}))
			// What reloader does then is not the point here: it finds its record gone and
			// records the workload, or, this soon after the ConfigMap's change, reloads it again.
			waitRecorded(t, ctx, cl, d)
			settled(t, tc.name+" after the replace", addr)
			after := snap(t, ctx, cl, ns, "replaced", tc.name)
			t.Logf("replaced: field %q -> %q -> %q, revision %s -> %s, %d ReplicaSets", b.field, reloaderField(tc.name, replaced), after.field, b.revision, after.revision, after.replicaSets)
			if tc.name != "env-vars" {
				return
			}

			// A commit that sets reloader's env var itself, as a manifest exported from the live
			// object does: the sync writes Git's value, a rollout, and reloader leaves it (its
			// record says the content is applied).
			b = snap(t, ctx, cl, ns, "pinned", tc.name)
			sent, err := clientSideApply(ctx, cl, withEnv(gitopsManifest(t, ns, "pinned", false, ""), "STAKATER_CFG_CONFIGMAP", "stale"))
			testutil.Must(t, err)
			d = &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pinned"}}
			waitObserved(t, ctx, cl, d)
			settled(t, "after the pinning sync", addr)
			after = snap(t, ctx, cl, ns, "pinned", tc.name)
			if after.field != "stale" || after.revision == b.revision || after.record != b.record {
				t.Errorf("pinned: field %q, revision %s -> %s, record %q -> %q; want Git's value, a new revision and the record unchanged", after.field, b.revision, after.revision, b.record, after.record)
			}
			t.Logf("pinned: the sync sent %s; field %q -> %q, revision %s -> %s", sent, b.field, after.field, b.revision, after.revision)
		})
	}
}

// reloadsSeries counts the reloads a reloader made.
const reloadsSeries = `reloader_reload_executed_total{success="true"}`

// revisionAnnotation is where the Deployment controller numbers the rollouts.
const revisionAnnotation = "deployment.kubernetes.io/revision"

// waitRolledOut waits until the Deployment controller has seen the Deployment's spec and
// numbered its rollout revision.
func waitRolledOut(t *testing.T, ctx context.Context, cl client.Client, d *appsv1.Deployment, revision string) {
	t.Helper()
	testutil.Eventually(t, d.Name+" at revision "+revision, testutil.Cond(func() (bool, error) {
		err := cl.Get(ctx, client.ObjectKeyFromObject(d), d)
		return err == nil && d.Status.ObservedGeneration == d.Generation && d.Annotations[revisionAnnotation] == revision, err
	}))
}

// waitObserved waits until the Deployment controller has seen the Deployment's spec: a
// change of its pod template has a new rollout revision by then.
func waitObserved(t *testing.T, ctx context.Context, cl client.Client, d *appsv1.Deployment) {
	t.Helper()
	testutil.Eventually(t, d.Name+" observed", testutil.Cond(func() (bool, error) {
		err := cl.Get(ctx, client.ObjectKeyFromObject(d), d)
		return err == nil && d.Status.ObservedGeneration == d.Generation && d.Annotations[revisionAnnotation] != "", err
	}))
}

// reloaderField is what the strategy writes into the pod template, "" when nothing.
func reloaderField(strategy string, d *appsv1.Deployment) string {
	switch strategy {
	case "env-vars":
		return envValue(d.Spec.Template.Spec, "STAKATER_CFG_CONFIGMAP")
	case "annotations":
		return d.Spec.Template.Annotations[reload.LastReloadedFrom]
	}
	// evict: the template stays as it is; its env var would be a template change.
	return envValue(d.Spec.Template.Spec, "STAKATER_CFG_CONFIGMAP")
}

// snapshot is what a sync must leave as it was.
type snapshot struct {
	field, record, revision string
	replicaSets             int
	spec                    appsv1.DeploymentSpec
	annotations, labels     map[string]string
	managers                []string
}

func snap(t *testing.T, ctx context.Context, cl client.Client, ns, name, strategy string) snapshot {
	t.Helper()
	d := &appsv1.Deployment{}
	testutil.Must(t, cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d))
	var rss appsv1.ReplicaSetList
	testutil.Must(t, cl.List(ctx, &rss, client.InNamespace(ns), client.MatchingLabels{"app": name}))
	s := snapshot{field: reloaderField(strategy, d), record: d.Annotations[reload.RecordAnnotation],
		revision: d.Annotations[revisionAnnotation], replicaSets: len(rss.Items),
		spec: d.Spec, annotations: d.Annotations, labels: d.Labels}
	for _, f := range d.ManagedFields {
		s.managers = append(s.managers, f.Manager+"/"+string(f.Operation))
	}
	if s.record == "" {
		t.Fatalf("%s has no record %s", name, reload.RecordAnnotation)
	}
	return s
}

func scrape(t *testing.T, addr string) testutil.Metrics {
	t.Helper()
	m, err := testutil.ScrapeMetrics("http://" + addr + "/metrics")
	testutil.Must(t, err)
	return m
}

// workloadReconciles counts reloader's reconciles of Deployments, whatever their outcome.
func workloadReconciles(m testutil.Metrics) float64 {
	var n float64
	for series, v := range m {
		if strings.HasPrefix(series, "reloader_workload_reconcile_total{") && strings.Contains(series, `kind="Deployment"`) {
			n += v
		}
	}
	return n
}
