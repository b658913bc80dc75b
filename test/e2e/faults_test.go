package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testenv/audit"
	"github.com/reloader-operator/reloader/internal/testenv/proc"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/testutil/follower"
	"github.com/reloader-operator/reloader/internal/testutil/objects"
	"github.com/reloader-operator/reloader/internal/testutil/records"
)

// reloader SIGKILLed between the delete and the create of a Job replacement: the API server
// refuses Job creates (a ValidatingAdmissionPolicy), so the process is certainly past the
// delete and not past the create when it dies. The next process (restarted, or the follower
// elected leader with --enable-ha) finds the replacement written down and creates the Job
// once, with the new config; a Deployment using the same ConfigMap is rolled once, not again
// by the next process.
func TestKilledBetweenJobDeleteAndCreate(t *testing.T) {
	t.Parallel() // its own control plane and reloader
	bin := buildReloader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, cl := startCluster(t, ctx, testenv.Options{})
	t.Run("restarted", func(t *testing.T) { killBetweenJobDeleteAndCreate(t, ctx, cluster, cl, bin, false) })
	t.Run("new leader", func(t *testing.T) { killBetweenJobDeleteAndCreate(t, ctx, cluster, cl, bin, true) })
}

func killBetweenJobDeleteAndCreate(t *testing.T, ctx context.Context, cluster *testenv.Cluster, cl client.Client, bin string, ha bool) {
	out := outputLoggedOnFailure(t)
	ns := "faults-job"
	if ha {
		ns = "faults-job-ha"
	}
	testutil.Must(t, cluster.EnsureNamespace(ctx, cl, ns))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}, Data: map[string]string{"k": "v1"}}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "migrate", Annotations: map[string]string{"reloader.stakater.com/auto": "true"}},
		Spec:       batchv1.JobSpec{BackoffLimit: ptr.To[int32](3), Template: corev1.PodTemplateSpec{Spec: usingConfigMap("cfg", corev1.RestartPolicyNever)}},
	}
	d := objects.AutoDeployment(ns, "web", "cfg")
	for _, o := range []client.Object{cm, job, d} {
		testutil.Must(t, cl.Create(ctx, o))
	}
	metrics := map[string]string{} // each process's metrics address, for settled
	start := func(name string) *proc.Process {
		addr, err := proc.FreeAddr()
		testutil.Must(t, err)
		metrics[name] = addr
		args := []string{"--metrics-addr=" + addr, "--namespaces=" + ns}
		if ha {
			args = append(args, "--enable-ha", "--leader-election-lease-duration=4s",
				"--leader-election-renew-deadline=3s", "--leader-election-retry-period=500ms")
		}
		p, err := proc.Run(proc.Spec{Bin: bin, Kubeconfig: cluster.Kubeconfig, Prefix: name + " | ", Out: out,
			Args: args, Env: []string{"POD_NAME=" + name, "POD_NAMESPACE=" + ns}})
		testutil.Must(t, err)
		t.Cleanup(p.Kill)
		return p
	}
	leads := func(name string) func() (bool, error) {
		return func() (bool, error) {
			var lease coordinationv1.Lease
			err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "stakater-reloader-lock"}, &lease)
			return err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity == name, client.IgnoreNotFound(err)
		}
	}
	first := start("first")
	if ha {
		testutil.Eventually(t, "the first reloader leads", testutil.Cond(leads("first")))
		start("second")
	}
	for _, o := range []client.Object{job, d} {
		waitRecorded(t, ctx, cl, o)
	}
	oldUID := job.UID
	jobs := watchCreations(t, ctx, cluster, &batchv1.JobList{}, ns)
	templates := watchTemplates(t, ctx, cluster.Config, ns)

	lift := denyCreates(t, ctx, cl, ns, "batch", "jobs", func() error {
		return cl.Create(ctx, &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "probe-"},
			Spec:       batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: usingConfigMap("none", corev1.RestartPolicyNever)}},
		})
	})
	cm.Data["k"] = "v2"
	testutil.Must(t, cl.Update(ctx, cm))
	testutil.Eventually(t, "the old Job deleted and its re-create refused", testutil.Cond(func() (bool, error) {
		err := cl.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{})
		if !apierrors.IsNotFound(err) {
			return false, client.IgnoreNotFound(err)
		}
		return hasEvent(ctx, cl, ns, "migrate", controller.ReasonReloadFail)
	}))
	first.Kill()
	t.Log("killed the first reloader between the delete and the create")
	var records appsv1.ControllerRevisionList
	testutil.Must(t, cl.List(ctx, &records, client.InNamespace(ns), client.HasLabels{controller.ReplacementLabel}))
	if len(records.Items) != 1 {
		t.Fatalf("%d replacement records in the cluster after the kill, want 1", len(records.Items))
	}
	lift()
	if ha {
		testutil.Eventually(t, "the second reloader leads", testutil.Cond(leads("second")))
	} else {
		start("second")
	}

	want := hash.ConfigMap(cm)
	envName := reload.EnvVarName(source.ID{Kind: source.ConfigMap, Name: "cfg"})
	var created batchv1.Job
	testutil.Eventually(t, "the Job re-created by the second reloader with the new config", testutil.Cond(func() (bool, error) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(job), &created); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return created.UID != oldUID && envValue(created.Spec.Template.Spec, envName) == want, nil
	}))
	testutil.Eventually(t, "the Deployment on the new config", testutil.Cond(func() (bool, error) {
		return templates.last("web", envName) == want, nil
	}))
	testutil.Eventually(t, "the replacement record removed", testutil.Cond(func() (bool, error) {
		err := cl.List(ctx, &records, client.InNamespace(ns), client.HasLabels{controller.ReplacementLabel})
		return err == nil && len(records.Items) == 0, err
	}))
	settled(t, "the second reloader", metrics["second"]) // room for a late duplicate

	if got, want := jobs.named("migrate"), []types.UID{oldUID, created.UID}; !slices.Equal(got, want) {
		t.Errorf("Jobs named migrate: %v, want the old one and exactly one replacement: %v", got, want)
	}
	if *created.Spec.BackoffLimit != 3 || created.Annotations[reload.RecordAnnotation] == "" {
		t.Errorf("the replacement lost the user's spec or the record: backoffLimit %d, annotations %v", *created.Spec.BackoffLimit, created.Annotations)
	}
	if v := templates.values("web", envName); len(v) != 1 {
		t.Errorf("Deployment web: %d template changes %v, want 1", len(v), v)
	}
}

// usingConfigMap is a pod spec reading all of ConfigMap name as env vars.
func usingConfigMap(name string, restart corev1.RestartPolicy) corev1.PodSpec {
	return corev1.PodSpec{RestartPolicy: restart, Containers: []corev1.Container{{Name: "app", Image: "busybox",
		EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}}}}
}

func waitRecorded(t *testing.T, ctx context.Context, cl client.Client, o client.Object) {
	t.Helper()
	testutil.Eventually(t, o.GetName()+" recorded", testutil.Cond(func() (bool, error) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			return false, err
		}
		return records.Recorded(ctx, cl, o) // on the workload, or in the ledger of first records
	}))
}

func envValue(spec corev1.PodSpec, name string) string {
	for _, e := range spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func hasEvent(ctx context.Context, cl client.Client, ns, name, reason string) (bool, error) {
	var events eventsv1.EventList
	if err := cl.List(ctx, &events, client.InNamespace(ns)); err != nil {
		return false, err
	}
	for _, e := range events.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			return true, nil
		}
	}
	return false, nil
}

// denyCreates makes the API server refuse creates of one resource in ns, with a
// ValidatingAdmissionPolicy, until the returned func is called. Policies take effect
// asynchronously: each change is waited for with probe, an attempt to create one.
func denyCreates(t *testing.T, ctx context.Context, cl client.Client, ns, group, resource string, probe func() error) (lift func()) {
	t.Helper()
	name := "deny-" + resource + "-" + ns
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule:       admissionv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{resource}},
				},
			}}},
			// Dry runs pass: reloader dry-runs a replacement before it deletes the Job, and
			// the fault injected here is a create refused after that check.
			Validations: []admissionv1.Validation{{Expression: "request.dryRun", Message: "test: creates refused"}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns},
			}},
		},
	}
	for _, o := range []client.Object{policy, binding} {
		testutil.Must(t, cl.Create(ctx, o))
	}
	testutil.Eventually(t, "creates of "+resource+" refused", testutil.Cond(func() (bool, error) { return probe() != nil, nil }))
	var once sync.Once
	lift = func() {
		once.Do(func() {
			_ = cl.Delete(ctx, binding)
			_ = cl.Delete(ctx, policy)
			testutil.Eventually(t, "creates of "+resource+" allowed again", testutil.Cond(func() (bool, error) { return probe() == nil, nil }))
		})
	}
	t.Cleanup(func() { _ = cl.Delete(context.Background(), binding); _ = cl.Delete(context.Background(), policy) })
	return lift
}

// creations records the UIDs of the objects in a namespace, by name, in the order a watch
// sees them: those there when it starts, then each one created.
type creations struct {
	mu   sync.Mutex
	uids map[string][]types.UID
}

func (c *creations) named(name string) []types.UID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]types.UID(nil), c.uids[name]...)
}

func watchCreations(t *testing.T, ctx context.Context, cluster *testenv.Cluster, list client.ObjectList, ns string) *creations {
	t.Helper()
	wc, err := client.NewWithWatch(cluster.Config, client.Options{})
	testutil.Must(t, err)
	c := &creations{uids: map[string][]types.UID{}}
	seen := map[types.UID]bool{}
	// Every creation counts: one missed while the watch was down fails the test.
	follower.Start(t, wc, list, follower.Config{Gaps: follower.GapNone}, func(typ watch.EventType, o client.Object) {
		if typ != watch.Added || seen[o.GetUID()] {
			return
		}
		seen[o.GetUID()] = true
		c.mu.Lock()
		c.uids[o.GetName()] = append(c.uids[o.GetName()], o.GetUID())
		c.mu.Unlock()
	}, client.InNamespace(ns))
	return c
}

// burst is a set of auto-reloaded Deployments, each reading its own ConfigMap, whose
// ConfigMaps are all written once a round.
type burst struct {
	cms []*corev1.ConfigMap
}

func newBurst(t *testing.T, ctx context.Context, cl client.Client, ns string, n int) *burst {
	t.Helper()
	b := &burst{}
	for i := range n {
		name := fmt.Sprintf("app-%d", i)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"round": "0"}}
		for _, o := range []client.Object{cm, objects.AutoDeployment(ns, name, name)} {
			testutil.Must(t, cl.Create(ctx, o))
		}
		b.cms = append(b.cms, cm)
	}
	return b
}

// round writes content round into every ConfigMap.
func (b *burst) round(t *testing.T, ctx context.Context, cl client.Client, round int) {
	t.Helper()
	for _, cm := range b.cms {
		cm.Data["round"] = strconv.Itoa(round)
		if err := cl.Update(ctx, cm); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}

// hashOf is the env var value for content round of ConfigMap cm.
func (b *burst) hashOf(cm *corev1.ConfigMap, round int) string {
	c := cm.DeepCopy()
	c.Data = map[string]string{"round": strconv.Itoa(round)}
	return hash.ConfigMap(c)
}

func (b *burst) env(cm *corev1.ConfigMap) string {
	return reload.EnvVarName(source.ID{Kind: source.ConfigMap, Name: cm.Name})
}

// checkRollouts fails for a Deployment that rolled twice to the same content, more often
// than there were rounds, or to a content that is no round's in rounds.
func (b *burst) checkRollouts(t *testing.T, cm *corev1.ConfigMap, values []string, rounds []int) {
	t.Helper()
	allowed := map[string]int{}
	for _, r := range rounds {
		allowed[b.hashOf(cm, r)] = r
	}
	seen := map[string]bool{}
	for _, v := range values {
		if _, ok := allowed[v]; !ok {
			t.Errorf("%s: rolled to a content of none of rounds %v: %v", cm.Name, rounds, values)
		}
		if seen[v] {
			t.Errorf("%s: rolled twice to the same content (a duplicate): %v", cm.Name, values)
		}
		seen[v] = true
	}
	if len(values) > len(rounds) {
		t.Errorf("%s: %d rollouts for %d rounds", cm.Name, len(values), len(rounds))
	}
}

// A workload deleted and created again under the same name in the middle of a burst: the
// new one is recorded, not rolled, for the content it was created with, then rolled for each
// later change; the others go on as before. 0 missed, 0 duplicates.
func TestWorkloadRecreatedDuringBurst(t *testing.T) {
	t.Parallel() // its own control plane and reloader
	bin := buildReloader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, cl := startCluster(t, ctx, testenv.Options{})
	out := outputLoggedOnFailure(t)
	const ns, workloads, rounds, recreateAfter = "faults-recreate", 6, 6, 3
	testutil.Must(t, cluster.EnsureNamespace(ctx, cl, ns))
	b := newBurst(t, ctx, cl, ns, workloads)
	addr, err := proc.FreeAddr()
	testutil.Must(t, err)
	p, err := proc.Run(proc.Spec{Bin: bin, Kubeconfig: cluster.Kubeconfig, Prefix: "reloader | ", Out: out,
		Args: []string{"--metrics-addr=" + addr}})
	testutil.Must(t, err)
	t.Cleanup(p.Stop)
	for _, cm := range b.cms {
		waitRecorded(t, ctx, cl, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cm.Name}})
	}
	templates := watchTemplates(t, ctx, cluster.Config, ns)

	recreated := b.cms[0]
	var newUID types.UID
	for round := 1; round <= rounds; round++ {
		b.round(t, ctx, cl, round)
		if round == recreateAfter {
			old := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: recreated.Name}}
			testutil.Must(t, cl.Delete(ctx, old))
			fresh := objects.AutoDeployment(ns, recreated.Name, recreated.Name)
			testutil.Eventually(t, "the name free again", testutil.Cond(func() (bool, error) {
				err := cl.Create(ctx, fresh)
				return err == nil, client.IgnoreAlreadyExists(err)
			}))
			newUID = fresh.UID
			// The next round waits for the record: a ConfigMap written after a workload's
			// creation may reach reloader before the workload does (two watches, no order
			// between them), and would then be its baseline.
			waitRecorded(t, ctx, cl, fresh)
		}
		time.Sleep(400 * time.Millisecond)
	}
	testutil.Eventually(t, "every Deployment on its ConfigMap's last content", testutil.Cond(func() (bool, error) {
		for _, cm := range b.cms {
			if templates.last(cm.Name, b.env(cm)) != b.hashOf(cm, rounds) {
				return false, nil
			}
		}
		var d appsv1.Deployment
		err := cl.Get(ctx, client.ObjectKeyFromObject(recreated), &d)
		return err == nil && d.UID == newUID && envValue(d.Spec.Template.Spec, b.env(recreated)) == b.hashOf(recreated, rounds), err
	}))
	settled(t, "reloader", addr) // room for a late duplicate

	all, after := []int{}, []int{}
	for r := 1; r <= rounds; r++ {
		all = append(all, r)
		if r > recreateAfter {
			after = append(after, r)
		}
	}
	for _, cm := range b.cms[1:] {
		b.checkRollouts(t, cm, templates.values(cm.Name, b.env(cm)), all)
	}
	values := templates.valuesOf(recreated.Name, newUID, b.env(recreated))
	t.Logf("re-created %s: rollouts %v", recreated.Name, values)
	b.checkRollouts(t, recreated, values, after)
}

// The API server restarted in the middle of a burst: every watch breaks; reloader's watches
// resume from a resourceVersion the new server's watch cache no longer serves (410 Gone), so
// its informers list again. What reloader wrote is judged from the API server's audit log:
// every patch of a Deployment, with its body. 0 missed, 0 duplicates.
func TestAPIServerRestartedDuringBurst(t *testing.T) {
	t.Parallel() // its own control plane and reloader
	bin := buildReloader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	policy, auditLog := filepath.Join(dir, "audit-policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Request
  users: ["reloader"]
  verbs: ["patch"]
  resources: [{group: "apps", resources: ["deployments"]}]
- level: Metadata
  users: ["reloader"]
  resources: [{group: "", resources: ["configmaps"]}]
- level: None
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cluster, cl := startCluster(t, ctx, testenv.Options{APIServerFlags: map[string]string{
		"audit-policy-file": policy, "audit-log-path": auditLog, "audit-log-format": "json"}})
	_, kubeconfig, err := cluster.AddUser("reloader", "system:masters")
	testutil.Must(t, err)
	out := outputLoggedOnFailure(t)
	const ns, workloads, rounds, restartAfter = "faults-apiserver", 8, 6, 3
	testutil.Must(t, cluster.EnsureNamespace(ctx, cl, ns))
	b := newBurst(t, ctx, cl, ns, workloads)
	addr, err := proc.FreeAddr()
	testutil.Must(t, err)
	p, err := proc.Run(proc.Spec{Bin: bin, Kubeconfig: kubeconfig, Prefix: "reloader | ", Out: out,
		Args: []string{"--metrics-addr=" + addr}})
	testutil.Must(t, err)
	t.Cleanup(p.Stop)
	for _, cm := range b.cms {
		waitRecorded(t, ctx, cl, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cm.Name}})
	}

	var restarted time.Time
	for round := 1; round <= rounds; round++ {
		b.round(t, ctx, cl, round)
		if round == restartAfter {
			restarted = time.Now()
			testutil.Must(t, cluster.RestartAPIServer())
			t.Logf("kube-apiserver restarted in %s", time.Since(restarted).Round(time.Millisecond))
		}
		time.Sleep(400 * time.Millisecond)
	}

	patches := func() map[string][]string {
		events, err := readAudit(auditLog)
		testutil.Must(t, err)
		byName := map[string][]string{}
		for _, e := range events {
			if e.Verb != "patch" || e.ObjectRef.Resource != "deployments" || e.ResponseStatus.Code != 200 {
				continue
			}
			if v := patchedEnvValues(e.RequestObject); len(v) > 0 {
				byName[e.ObjectRef.Name] = append(byName[e.ObjectRef.Name], v...)
			}
		}
		return byName
	}
	testutil.Eventually(t, "every Deployment patched to its ConfigMap's last content (audit log)", testutil.Cond(func() (bool, error) {
		got := patches()
		for _, cm := range b.cms {
			v := got[cm.Name]
			if len(v) == 0 || v[len(v)-1] != b.hashOf(cm, rounds) {
				return false, nil
			}
		}
		return true, nil
	}))
	settled(t, "reloader", addr) // room for a late duplicate
	all := make([]int, rounds)
	for i := range all {
		all[i] = i + 1
	}
	got := patches()
	for _, cm := range b.cms {
		b.checkRollouts(t, cm, got[cm.Name], all)
		var d appsv1.Deployment
		testutil.Must(t, cl.Get(ctx, client.ObjectKeyFromObject(cm), &d))
		if v := envValue(d.Spec.Template.Spec, b.env(cm)); v != b.hashOf(cm, rounds) {
			t.Errorf("%s: template has %s=%q, want the last round's", cm.Name, b.env(cm), v)
		}
	}

	// The relist: after the restart, reloader read ConfigMaps afresh (a list, or a watch
	// that sends the initial state), not only resumed its watch.
	events, err := readAudit(auditLog)
	testutil.Must(t, err)
	var relists, after []string
	for _, e := range events {
		if e.ObjectRef.Resource != "configmaps" || e.Received.Before(restarted) {
			continue
		}
		after = append(after, e.Verb+" "+e.RequestURI)
		if e.Verb == "list" || strings.Contains(e.RequestURI, "sendInitialEvents=true") {
			relists = append(relists, e.Verb+" "+e.RequestURI)
		}
	}
	t.Logf("ConfigMap requests after the restart: %v", after)
	if len(relists) == 0 {
		t.Errorf("reloader did not list ConfigMaps again after the restart; its requests: %v", after)
	}
}

// auditEvent is the part of an audit.k8s.io/v1 Event these tests read, the request body
// included.
type auditEvent struct {
	audit.Event
	RequestObject json.RawMessage `json:"requestObject"`
}

func readAudit(path string) ([]auditEvent, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []auditEvent
	for _, line := range strings.Split(string(data), "\n") {
		var e auditEvent
		if json.Unmarshal([]byte(line), &e) == nil && e.Verb != "" {
			out = append(out, e)
		}
	}
	return out, nil
}

// patchedEnvValues returns the env var values a patch of a Deployment writes into its pod
// template, in order: from a merge patch (a Deployment), or from a JSON patch's adds and
// replaces under a container's env (a whole list, one variable, or one value), as reloader's
// guarded patch writes them.
func patchedEnvValues(body json.RawMessage) []string {
	var out []string
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if json.Unmarshal(body, &ops) == nil {
		for _, op := range ops {
			if (op.Op != "add" && op.Op != "replace") || !strings.HasPrefix(op.Path, "/spec/template/spec/containers/") ||
				!strings.Contains(op.Path, "/env") {
				continue
			}
			var list []corev1.EnvVar
			var one corev1.EnvVar
			var value string
			switch {
			case json.Unmarshal(op.Value, &list) == nil:
				for _, env := range list {
					if env.Value != "" {
						out = append(out, env.Value)
					}
				}
			case json.Unmarshal(op.Value, &one) == nil && one.Value != "":
				out = append(out, one.Value)
			case json.Unmarshal(op.Value, &value) == nil && value != "":
				out = append(out, value)
			}
		}
		return out
	}
	var d appsv1.Deployment
	if json.Unmarshal(body, &d) != nil {
		return nil
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, env := range c.Env {
			if env.Value != "" {
				out = append(out, env.Value)
			}
		}
	}
	return out
}
