package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/metainfo"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/rbac"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testenv/proc"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/testutil/follower"
)

// upstreamRules are the ClusterRole upstream's chart (stakater/Reloader v1.4.21) renders
// with its default values, cluster-wide: no watch on any workload kind, core Events.
func upstreamRules() []rbacv1.PolicyRule {
	r := func(group string, resources []string, verbs ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: verbs}
	}
	return []rbacv1.PolicyRule{
		r("", []string{"secrets", "configmaps"}, "list", "get", "watch"),
		r("apps", []string{"deployments", "daemonsets", "statefulsets"}, "list", "get", "update", "patch"),
		r("batch", []string{"cronjobs"}, "list", "get"),
		r("batch", []string{"jobs"}, "create", "delete", "list", "get"),
		r("", []string{"events"}, "create", "patch"),
	}
}

// upstreamMetadataRules are the Role upstream's chart grants in its own namespace, for its
// meta-info ConfigMap.
func upstreamMetadataRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list", "get", "watch", "create", "update"}}}
}

// upstreamUser is a user granted what upstream's chart grants its ServiceAccount, cluster-wide
// and in reloader's namespace own (created here), where upstream left its meta-info
// ConfigMap. It returns the user's kubeconfig.
func upstreamUser(t *testing.T, ctx context.Context, cluster *testenv.Cluster, cl client.Client, own string) string {
	t.Helper()
	const user = "upstream-reloader"
	testutil.Must(t, cluster.EnsureNamespace(ctx, cl, own))
	_, kubeconfig, err := cluster.AddUser(user)
	testutil.Must(t, err)
	grant(t, ctx, cl, user, "", "reloader-reloader-role", upstreamRules())
	grant(t, ctx, cl, user, own, "reloader-reloader-metadata-role", upstreamMetadataRules())
	meta := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: own, Name: metainfo.Name,
		Labels: map[string]string{metainfo.LabelKey: metainfo.LabelValue}}, Data: map[string]string{"buildInfo": "{}"}}
	testutil.Must(t, cl.Create(ctx, meta))
	return kubeconfig
}

// startReady runs the reloader binary with kubeconfig, own as its namespace, and waits for
// /ready. It returns the process and its metrics address.
func startReady(t *testing.T, ctx context.Context, bin, kubeconfig, own, prefix string, out *proc.Output, args ...string) (*proc.Process, string) {
	t.Helper()
	addr, err := proc.FreeAddr()
	testutil.Must(t, err)
	p, err := proc.Run(proc.Spec{Bin: bin, Kubeconfig: kubeconfig, Prefix: prefix, Out: out,
		Args: append([]string{"--metrics-addr=" + addr}, args...),
		Env:  []string{"RELOADER_NAMESPACE=" + own, "POD_NAMESPACE=" + own}})
	testutil.Must(t, err)
	t.Cleanup(p.Stop)
	testutil.Eventually(t, "/ready 200", testutil.Cond(func() (bool, error) {
		code, _ := get("http://" + addr + "/ready")
		return code == http.StatusOK, nil
	}))
	return p, addr
}

// grant binds user to rules: cluster-wide when ns is "", else in ns.
func grant(t *testing.T, ctx context.Context, cl client.Client, user, ns, name string, rules []rbacv1.PolicyRule) {
	t.Helper()
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: user, APIGroup: rbacv1.GroupName}}
	var objs []client.Object
	if ns == "" {
		objs = []client.Object{
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subject,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}},
		}
	} else {
		objs = []client.Object{
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Subjects: subject,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}},
		}
	}
	for _, o := range objs {
		testutil.Must(t, cl.Create(ctx, o))
	}
}

// templateCounter counts, per "Kind/name", the pod-template changes a watch sees, for
// Deployments, StatefulSets and DaemonSets of one namespace.
type templateCounter struct {
	mu      sync.Mutex
	current map[string]string
	changes map[string]int
}

func countTemplates(t *testing.T, ctx context.Context, cfg *rest.Config, ns string) *templateCounter {
	t.Helper()
	wc, err := client.NewWithWatch(cfg, client.Options{})
	testutil.Must(t, err)
	c := &templateCounter{current: map[string]string{}, changes: map[string]int{}}
	for _, list := range []client.ObjectList{&appsv1.DeploymentList{}, &appsv1.StatefulSetList{}, &appsv1.DaemonSetList{}} {
		follower.Start(t, wc, list, follower.Config{}, func(_ watch.EventType, o client.Object) {
			var key string
			var tpl corev1.PodTemplateSpec
			switch o := o.(type) {
			case *appsv1.Deployment:
				key, tpl = "Deployment/"+o.Name, o.Spec.Template
			case *appsv1.StatefulSet:
				key, tpl = "StatefulSet/"+o.Name, o.Spec.Template
			case *appsv1.DaemonSet:
				key, tpl = "DaemonSet/"+o.Name, o.Spec.Template
			default:
				return
			}
			b, _ := json.Marshal(tpl)
			c.mu.Lock()
			if prev, ok := c.current[key]; ok && prev != string(b) {
				c.changes[key]++
			}
			c.current[key] = string(b)
			c.mu.Unlock()
		}, client.InNamespace(ns))
	}
	return c
}

func (c *templateCounter) of(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changes[key]
}

// degradedWorkloads are a Deployment, a StatefulSet and a DaemonSet reading ConfigMap cfg and
// Secret sec, annotated auto, and a Deployment "idle" reading only ConfigMap other.
func degradedWorkloads(ns string) []client.Object {
	spec := func(cm string, secret bool) corev1.PodTemplateSpec {
		c := corev1.Container{Name: "app", Image: "busybox",
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}}}
		if secret {
			c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}}})
		}
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
	}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{"reloader.stakater.com/auto": "true"}}
	}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	return []client.Object{
		&appsv1.Deployment{ObjectMeta: meta("web"), Spec: appsv1.DeploymentSpec{Selector: sel, Template: spec("cfg", true)}},
		&appsv1.StatefulSet{ObjectMeta: meta("db"), Spec: appsv1.StatefulSetSpec{Selector: sel, Template: spec("cfg", true)}},
		&appsv1.DaemonSet{ObjectMeta: meta("agent"), Spec: appsv1.DaemonSetSpec{Selector: sel, Template: spec("cfg", true)}},
		&appsv1.Deployment{ObjectMeta: meta("idle"), Spec: appsv1.DeploymentSpec{Selector: sel, Template: spec("other", false)}},
	}
}

func workloadKey(o client.Object) string {
	switch o.(type) {
	case *appsv1.Deployment:
		return "Deployment/" + o.GetName()
	case *appsv1.StatefulSet:
		return "StatefulSet/" + o.GetName()
	default:
		return "DaemonSet/" + o.GetName()
	}
}

// Swapping only the image under upstream's RBAC (no watch on workloads): reloader enters the
// degraded mode, says so (log, reloader_degraded, an Event), becomes ready and reloads each
// kind once per change; nothing rolls at start-up; a change made while it is stopped is rolled
// out at the restart for the workloads it had recorded.
func TestImageSwapUnderUpstreamRBAC(t *testing.T) {
	t.Parallel() // its own control plane and reloader
	bin := buildReloader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cluster, cl := startCluster(t, ctx, testenv.Options{})
	out := outputLoggedOnFailure(t)

	const own, ns = "reloader", "apps"
	testutil.Must(t, cluster.EnsureNamespace(ctx, cl, ns))
	kubeconfig := upstreamUser(t, ctx, cluster, cl, own)
	cfg := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}, Data: map[string]string{"k": "v1"}}
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"}, Data: map[string]string{"k": "v1"}}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sec"}, Data: map[string][]byte{"k": []byte("s1")}}
	// A CronJob: upstream grants no patch on it, so its reloads are refused, once per change, not in a loop.
	cron := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly", Annotations: map[string]string{"reloader.stakater.com/auto": "true"}},
		Spec: batchv1.CronJobSpec{Schedule: "0 0 * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "app", Image: "busybox",
				EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}}}}}}}}
	workloads := degradedWorkloads(ns)
	for _, o := range append([]client.Object{cfg, other, sec, cron}, workloads...) {
		testutil.Must(t, cl.Create(ctx, o))
	}
	counter := countTemplates(t, ctx, cluster.Config, ns)

	start := func(prefix string) (*proc.Process, string) {
		return startReady(t, ctx, bin, kubeconfig, own, prefix, out, "--coalesce-window=200ms")
	}
	p, addr := start("reloader | ")
	for _, kind := range []string{"Deployment", "StatefulSet", "DaemonSet", "CronJob", "Job"} {
		if v := gauge("http://"+addr+"/metrics", "reloader_degraded", `kind="`+kind+`"`); v != 1 {
			t.Errorf("reloader_degraded{kind=%q} = %d; want 1", kind, v)
		}
	}
	if log := out.String(); !strings.Contains(log, "DEGRADED MODE") ||
		!strings.Contains(log, `{apiGroups: ["apps"], resources: ["deployments", "statefulsets", "daemonsets"], verbs: ["watch"]}`) ||
		!strings.Contains(log, `{apiGroups: ["batch"], resources: ["cronjobs", "jobs"], verbs: ["watch"]}`) {
		t.Errorf("no degraded-mode warning naming the rules to add in the log")
	}
	for _, o := range workloads {
		waitRecorded(t, ctx, cl, o)
	}
	checkChanges := func(when string, want int) {
		t.Helper()
		for _, o := range workloads {
			n := want
			if o.GetName() == "idle" {
				n = 0
			}
			if got := counter.of(workloadKey(o)); got != n {
				t.Errorf("%s: %s changed its pod template %d times; want %d", when, workloadKey(o), got, n)
			}
		}
	}
	settle := func() { settled(t, "reloader", addr) } // a second reload, if any, would move its counters
	settle()
	checkChanges("at start-up", 0)

	// The Events, core ones as upstream's RBAC grants: the degraded mode on the meta-info
	// ConfigMap, and (below) the CronJob's refused reload naming the verb to grant.
	eventWith := func(ns, name, reason, note string) func() (bool, error) {
		return func() (bool, error) {
			var events eventsv1.EventList
			if err := cl.List(ctx, &events, client.InNamespace(ns)); err != nil {
				return false, err
			}
			for _, e := range events.Items {
				if e.Regarding.Name == name && e.Reason == reason && e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, note) {
					return true, nil
				}
			}
			return false, nil
		}
	}
	testutil.Eventually(t, "the DegradedMode Event on the meta-info ConfigMap", testutil.Cond(eventWith(own, metainfo.Name, "DegradedMode",
		`{apiGroups: ["apps"], resources: ["deployments", "statefulsets", "daemonsets"], verbs: ["watch"]}`)))

	// The CronJob's first record is kept in the ledger of first records (upstream's Role in
	// its namespace grants the ConfigMaps): nothing is refused until its reload.
	cfg.Data["k"] = "v2"
	testutil.Must(t, cl.Update(ctx, cfg))
	testutil.Eventually(t, "the ReloadFail Event on the CronJob", testutil.Cond(eventWith(ns, cron.Name, "ReloadFail", "patch cronjobs.batch")))
	for _, o := range workloads[:3] {
		testutil.Eventually(t, workloadKey(o)+" reloaded on the ConfigMap", testutil.Cond(func() (bool, error) { return counter.of(workloadKey(o)) >= 1, nil }))
	}
	settle()
	checkChanges("after a ConfigMap change", 1)

	sec.Data["k"] = []byte("s2")
	testutil.Must(t, cl.Update(ctx, sec))
	for _, o := range workloads[:3] {
		testutil.Eventually(t, workloadKey(o)+" reloaded on the Secret", testutil.Cond(func() (bool, error) { return counter.of(workloadKey(o)) >= 2, nil }))
	}
	settle()
	checkChanges("after a Secret change", 2)

	// Stopped; the ConfigMap changes; started again: the recorded workloads catch up, once.
	p.Stop()
	cfg.Data["k"] = "v3"
	testutil.Must(t, cl.Update(ctx, cfg))
	_, addr = start("reloader (restarted) | ")
	for _, o := range workloads[:3] {
		testutil.Eventually(t, workloadKey(o)+" reloaded after the restart", testutil.Cond(func() (bool, error) { return counter.of(workloadKey(o)) >= 3, nil }))
	}
	settle()
	checkChanges("after a change made while stopped", 3)

	// The CronJob's reloads were refused by RBAC: reported, not retried in a loop (once per
	// change of its ConfigMap heard, the one made while stopped caught up at the restart).
	if n := strings.Count(out.String(), "write refused by RBAC"); n == 0 || n > 4 {
		t.Errorf("the CronJob's refused writes were logged %d times; want 1 to 4", n)
	}
	testutil.Must(t, cl.Get(ctx, client.ObjectKeyFromObject(cron), cron))
	if _, ok := cron.Annotations[reload.RecordAnnotation]; ok {
		t.Error("the CronJob was recorded although upstream's RBAC grants no patch on CronJobs")
	}
}

// With the RBAC of this project's table (rbac.For, watch granted), reloader does not enter the
// degraded mode: reloader_degraded is 0 for every kind and nothing warns of it.
func TestFullRBACIsNotDegraded(t *testing.T) {
	t.Parallel() // its own control plane and reloader
	bin := buildReloader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cluster, cl := startCluster(t, ctx, testenv.Options{})
	out := outputLoggedOnFailure(t)
	const own, user = "reloader", "table-reloader"
	testutil.Must(t, cluster.EnsureNamespace(ctx, cl, own))
	_, kubeconfig, err := cluster.AddUser(user)
	testutil.Must(t, err)
	env := map[string]string{"RELOADER_NAMESPACE": own, "POD_NAMESPACE": own}
	conf, err := options.Load(options.Default(), func(k string) string { return env[k] })
	testutil.Must(t, err)
	rules := rbac.For(conf, rbac.Platform{})
	grant(t, ctx, cl, user, "", "reloader-watched", rules.Watched)
	grant(t, ctx, cl, user, "", "reloader-cluster", rules.Cluster)
	grant(t, ctx, cl, user, own, "reloader-own", rules.Own)
	_, addr := startReady(t, ctx, bin, kubeconfig, own, "reloader | ", out)
	for _, kind := range []string{"Deployment", "StatefulSet", "DaemonSet", "CronJob", "Job"} {
		if v := gauge("http://"+addr+"/metrics", "reloader_degraded", fmt.Sprintf("kind=%q", kind)); v != 0 {
			t.Errorf("reloader_degraded{kind=%q} = %d; want 0", kind, v)
		}
	}
	if strings.Contains(out.String(), "DEGRADED MODE") {
		t.Error("degraded-mode warning with full RBAC")
	}
}
