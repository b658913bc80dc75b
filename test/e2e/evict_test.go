package e2e

import (
	"context"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testenv/proc"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/testutil/follower"
	"github.com/reloader-operator/reloader/internal/testutil/objects"
)

// A Deployment whose template a (fake) operator resets, restarted by eviction: each change
// replaces every pod exactly once, one at a time within its PodDisruptionBudget, the template
// untouched; a refusal by the budget waits; a reloader killed mid-way resumes without evicting
// a pod twice; a change during a restart restarts to the newest content; an unknown strategy
// value is reported.
func TestEvictStrategyRestartsPodsAnOperatorOwns(t *testing.T) {
	t.Parallel() // its own control plane and reloader
	const ns, own = "evict", "reloader-own"
	ctx, bin, cluster, cl, out := evictCluster(t, 5*time.Minute, ns, own)
	start := func() *proc.Process {
		p, _ := startReady(t, ctx, bin, cluster.Kubeconfig, own, "reloader | ", out, "--enable-evict-strategy", "--coalesce-window=100ms")
		return p
	}
	first := start()

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}, Data: map[string]string{"k": "v0"}}
	web := objects.AutoDeployment(ns, "web", "cfg")
	web.Annotations[reload.RestartStrategyAnnotation] = reload.RestartEvict
	web.Spec.Replicas = ptr.To[int32](3)
	bad := objects.AutoDeployment(ns, "bad", "cfg")
	bad.Annotations[reload.RestartStrategyAnnotation] = "bogus"
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{Selector: web.Spec.Selector,
			MaxUnavailable: ptr.To(intstr.FromInt32(0))}, // refuses every eviction, until relaxed
	}
	for _, o := range []client.Object{cm, web, bad, pdb} {
		testutil.Must(t, cl.Create(ctx, o))
	}
	pods := watchPods(t, ctx, cluster, ns, "web", 3)
	waitRecorded(t, ctx, cl, web)
	waitRecorded(t, ctx, cl, bad)
	template := *web.Spec.Template.DeepCopy() // as the API server defaulted it
	resets := fakeOperator(ctx, cl, client.ObjectKeyFromObject(web), template)
	// The same operator owns bad, whose unknown strategy falls back to a template change: the
	// operator undoes it, which is the problem the evict strategy solves.
	badResets := fakeOperator(ctx, cl, client.ObjectKeyFromObject(bad), *bad.Spec.Template.DeepCopy())
	testutil.Eventually(t, "3 ready pods", testutil.Cond(func() (bool, error) { return len(pods.ready()) == 3, nil }))

	change := func(v string) {
		t.Helper()
		cm.Data["k"] = v
		testutil.Must(t, cl.Update(ctx, cm))
	}
	restarted := func(round string) {
		t.Helper()
		testutil.Eventually(t, round+": restart over", testutil.Cond(func() (bool, error) {
			d := &appsv1.Deployment{}
			err := cl.Get(ctx, client.ObjectKeyFromObject(web), d)
			_, evicting := d.Annotations[reload.EvictingAnnotation]
			return err == nil && !evicting && len(pods.ready()) == 3, err
		}))
	}

	// Round 1: the budget refuses at first; nothing goes until it is relaxed.
	r1 := pods.start("round 1")
	change("v1")
	testutil.Eventually(t, "EvictionBlocked", testutil.Cond(func() (bool, error) { return hasEvent(ctx, cl, ns, "web", "EvictionBlocked") }))
	testutil.Eventually(t, "bad's InvalidAnnotation", testutil.Cond(func() (bool, error) { return hasEvent(ctx, cl, ns, "bad", "InvalidAnnotation") }))
	testutil.Eventually(t, "the operator undoing bad's template change", testutil.Cond(func() (bool, error) { return badResets() == 1, nil }))
	if n := len(pods.deleted()); n != 0 {
		t.Fatalf("%d pods deleted while the budget allows none", n)
	}
	relax := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"maxUnavailable":1}}`))
	testutil.Must(t, cl.Patch(ctx, pdb, relax))
	restarted("round 1")
	pods.check(t, r1, true)

	// Round 2: reloader killed after the first eviction; the next one finishes, evicting no
	// pod twice and none of the new ones.
	r2 := pods.start("round 2")
	change("v2")
	testutil.Eventually(t, "round 2: first eviction", testutil.Cond(func() (bool, error) { return len(pods.deletedOf(r2.before)) >= 1, nil }))
	first.Kill()
	mid := &appsv1.Deployment{}
	testutil.Must(t, cl.Get(ctx, client.ObjectKeyFromObject(web), mid))
	if _, evicting := mid.Annotations[reload.EvictingAnnotation]; !evicting || len(pods.deletedOf(r2.before)) == len(r2.before) {
		t.Fatalf("reloader was not killed mid-restart: %d of %d evicted", len(pods.deletedOf(r2.before)), len(r2.before))
	}
	t.Logf("round 2: reloader killed after %d of %d evictions", len(pods.deletedOf(r2.before)), len(r2.before))
	start()
	restarted("round 2")
	pods.check(t, r2, true)

	// Round 3: a second change while the restart of the first is under way restarts to it.
	r3 := pods.start("round 3")
	change("v3")
	testutil.Eventually(t, "round 3: first eviction", testutil.Cond(func() (bool, error) { return len(pods.deletedOf(r3.before)) >= 1, nil }))
	d := &appsv1.Deployment{}
	testutil.Must(t, cl.Get(ctx, client.ObjectKeyFromObject(web), d))
	v3 := d.Annotations[reload.RecordAnnotation]
	change("v4")
	var since time.Time
	testutil.Eventually(t, "round 3: restart of v4", testutil.Cond(func() (bool, error) {
		d := &appsv1.Deployment{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(web), d); err != nil {
			return false, err
		}
		e, err := reload.ParseEvicting(d.Annotations[reload.EvictingAnnotation], time.Now())
		if err != nil || d.Annotations[reload.RecordAnnotation] == v3 || e.Record != reload.RecordDigest(d.Annotations[reload.RecordAnnotation]) {
			return false, nil
		}
		since = e.Since
		return true, nil
	}))
	restarted("round 3")
	for _, uid := range pods.check(t, r3, false) {
		if p := pods.pod(uid); !p.CreationTimestamp.Time.Before(since) {
			t.Errorf("pod %s created %s, after the restart for v4 began (%s), was evicted", p.Name, p.CreationTimestamp, since)
		}
	}
	for _, p := range pods.ready() {
		if p.CreationTimestamp.Time.Before(since) {
			t.Errorf("pod %s created %s, before the restart for v4 began (%s)", p.Name, p.CreationTimestamp, since)
		}
	}

	testutil.Must(t, cl.Get(ctx, client.ObjectKeyFromObject(web), d))
	if !equality.Semantic.DeepEqual(d.Spec.Template, template) {
		t.Errorf("template changed: %+v", d.Spec.Template)
	}
	if n := resets(); n != 0 {
		t.Errorf("the operator reset web's template %d times, want 0", n)
	}
	var rss appsv1.ReplicaSetList
	testutil.Must(t, cl.List(ctx, &rss, client.InNamespace(ns), client.MatchingLabels{"app": "web"}))
	if len(rss.Items) != 1 {
		t.Errorf("%d ReplicaSets of web: reloader changed its template", len(rss.Items))
	}
	t.Logf("pods created %d, deleted %d over 3 rounds of 3 replicas; template resets by the operator: web %d, bad %d", len(pods.created()), len(pods.deleted()), resets(), badResets())
}

// fakeOperator resets the Deployment's template to tpl whenever it differs, as operators do,
// and counts its resets.
func fakeOperator(ctx context.Context, cl client.Client, key types.NamespacedName, tpl corev1.PodTemplateSpec) func() int {
	var mu sync.Mutex
	resets := 0
	go func() {
		for ctx.Err() == nil {
			d := &appsv1.Deployment{}
			if cl.Get(ctx, key, d) == nil && !equality.Semantic.DeepEqual(d.Spec.Template, tpl) {
				d.Spec.Template = tpl
				if err := cl.Update(ctx, d); err == nil {
					mu.Lock()
					resets++
					mu.Unlock()
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return func() int { mu.Lock(); defer mu.Unlock(); return resets }
}

// podLog follows the pods labelled app=name from a watch: each created and deleted once.
type podLog struct {
	mu       sync.Mutex
	pods     map[types.UID]corev1.Pod
	order    []types.UID
	deletes  map[types.UID]int
	delOrder []types.UID
	minAvail int
	replicas int
}

func watchPods(t *testing.T, ctx context.Context, cluster *testenv.Cluster, ns, name string, replicas int) *podLog {
	t.Helper()
	wc, err := client.NewWithWatch(cluster.Config, client.Options{})
	testutil.Must(t, err)
	l := &podLog{pods: map[types.UID]corev1.Pod{}, deletes: map[types.UID]int{}, minAvail: -1, replicas: replicas}
	// Every state counts (the least available is between two): one missed while the watch
	// was down fails the test.
	follower.Start(t, wc, &corev1.PodList{}, follower.Config{Gaps: follower.GapNone}, func(typ watch.EventType, o client.Object) {
		p, ok := o.(*corev1.Pod)
		if !ok {
			return
		}
		l.mu.Lock()
		if _, known := l.pods[p.UID]; !known {
			l.order = append(l.order, p.UID)
		}
		l.pods[p.UID] = *p
		if typ == watch.Deleted {
			l.deletes[p.UID]++
			l.delOrder = append(l.delOrder, p.UID)
		}
		if avail := l.available(); l.minAvail >= 0 && avail < l.minAvail || l.minAvail < 0 && avail == l.replicas {
			l.minAvail = avail
		}
		l.mu.Unlock()
	}, client.InNamespace(ns), client.MatchingLabels{"app": name})
	return l
}

// available counts the pods Ready and not terminating; the caller holds mu.
func (l *podLog) available() int {
	n := 0
	for uid, p := range l.pods {
		if l.deletes[uid] == 0 && p.DeletionTimestamp == nil && isReady(p) {
			n++
		}
	}
	return n
}

func isReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (l *podLog) ready() []corev1.Pod {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []corev1.Pod
	for uid, p := range l.pods {
		if l.deletes[uid] == 0 && p.DeletionTimestamp == nil && isReady(p) {
			out = append(out, p)
		}
	}
	return out
}

// live are the UIDs of the pods not deleted.
func (l *podLog) live() []types.UID {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []types.UID
	for _, uid := range l.order {
		if l.deletes[uid] == 0 {
			out = append(out, uid)
		}
	}
	return out
}

func (l *podLog) created() []types.UID {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.order)
}

func (l *podLog) deleted() []types.UID { return l.deletedOf(nil) }

func (l *podLog) pod(uid types.UID) corev1.Pod {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pods[uid]
}

// deletedOf are the deleted pods among uids (all when nil).
func (l *podLog) deletedOf(uids []types.UID) []types.UID {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []types.UID
	for _, uid := range l.order {
		if l.deletes[uid] > 0 && (uids == nil || slices.Contains(uids, uid)) {
			out = append(out, uid)
		}
	}
	return out
}

// round is the state when a round starts: the pods live and the deletions so far.
type round struct {
	name   string
	before []types.UID
	n0     int
}

func (l *podLog) start(name string) round {
	l.mu.Lock()
	n0 := len(l.delOrder)
	l.mu.Unlock()
	return round{name: name, before: l.live(), n0: n0}
}

// check says what a round replaced: every pod live before it, each once, one at a time;
// exact means nothing else (no pod created during the round).
func (l *podLog) check(t *testing.T, r round, exact bool) (gone []types.UID) {
	t.Helper()
	after := l.live()
	l.mu.Lock()
	gone = slices.Clone(l.delOrder[r.n0:])
	minAvail := l.minAvail
	l.mu.Unlock()
	t.Logf("%s: %d pods before, %d deleted (evicted), %d live after; fewest available at once so far: %d", r.name, len(r.before), len(gone), len(after), minAvail)
	for _, uid := range r.before {
		if !slices.Contains(gone, uid) {
			t.Errorf("%s: pod %s from before was not replaced", r.name, uid)
		}
	}
	if exact && len(gone) != len(r.before) {
		t.Errorf("%s: %d pods deleted, want the %d from before, each once: %v", r.name, len(gone), len(r.before), gone)
	}
	for _, uid := range after {
		if slices.Contains(r.before, uid) {
			t.Errorf("%s: pod %s still runs from before", r.name, uid)
		}
	}
	if len(after) != l.replicas {
		t.Errorf("%s: %d pods live, want %d", r.name, len(after), l.replicas)
	}
	if minAvail < l.replicas-1 {
		t.Errorf("%s: only %d pods available at one time; the budget allows 1 unavailable", r.name, minAvail)
	}
	return gone
}

// A StatefulSet's replacement pod has the name of the pod it replaces: each is evicted once
// all the same (the eviction names the pod's UID), and the StatefulSet keeps its revision.
func TestEvictStrategyRestartsStatefulSetPodsOnce(t *testing.T) {
	t.Parallel() // its own control plane and reloader
	const ns, own = "evict-sts", "reloader-own"
	ctx, bin, cluster, cl, out := evictCluster(t, 3*time.Minute, ns, own)
	startReady(t, ctx, bin, cluster.Kubeconfig, own, "reloader | ", out, "--enable-evict-strategy", "--coalesce-window=100ms")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}, Data: map[string]string{"k": "v0"}}
	labels := map[string]string{"app": "db"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db", Annotations: map[string]string{
			"reloader.stakater.com/auto": "true", reload.RestartStrategyAnnotation: reload.RestartEvict}},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: usingConfigMap("cfg", corev1.RestartPolicyAlways)}},
	}
	for _, o := range []client.Object{cm, sts} {
		testutil.Must(t, cl.Create(ctx, o))
	}
	pods := watchPods(t, ctx, cluster, ns, "db", 2)
	waitRecorded(t, ctx, cl, sts)
	testutil.Eventually(t, "2 ready pods", testutil.Cond(func() (bool, error) { return len(pods.ready()) == 2, nil }))
	testutil.Must(t, cl.Get(ctx, client.ObjectKeyFromObject(sts), sts))
	revision := sts.Status.CurrentRevision
	r := pods.start("statefulset")
	cm.Data["k"] = "v1"
	testutil.Must(t, cl.Update(ctx, cm))
	testutil.Eventually(t, "restart over", testutil.Cond(func() (bool, error) {
		err := cl.Get(ctx, client.ObjectKeyFromObject(sts), sts)
		_, evicting := sts.Annotations[reload.EvictingAnnotation]
		return err == nil && len(pods.deletedOf(r.before)) == 2 && !evicting && len(pods.ready()) == 2, err
	}))
	// Not exact: kwok's fake kubelet deletes a terminating pod by name, so when the
	// StatefulSet has re-created the name meanwhile, the new pod goes too (a real kubelet
	// deletes with the pod's UID as precondition). What reloader evicted is in its log: each
	// pod from before, once, and nothing else.
	pods.check(t, r, false)
	evicted := regexp.MustCompile(`\tevicted pod\t.*"uid": "([^"]+)"`).FindAllStringSubmatch(out.String(), -1)
	var uids []types.UID
	for _, m := range evicted {
		uids = append(uids, types.UID(m[1]))
	}
	if slices.Sort(uids); !slices.Equal(uids, slices.Sorted(slices.Values(r.before))) {
		t.Errorf("reloader evicted %v, want each pod from before once: %v", uids, r.before)
	}
	if sts.Status.CurrentRevision != revision || sts.Status.UpdateRevision != revision {
		t.Errorf("revision %s -> current %s, update %s: the template changed", revision, sts.Status.CurrentRevision, sts.Status.UpdateRevision)
	}
	names := map[string]int{}
	for _, p := range pods.ready() {
		names[p.Name]++
	}
	t.Logf("statefulset: pods now %v, deleted %d", names, len(pods.deleted()))
}

// evictCluster starts what an evict test runs on, for at most timeout: a control plane with
// rollouts and one fake node, namespaces ns and own (reloader's), and the reloader binary.
func evictCluster(t *testing.T, timeout time.Duration, ns, own string) (context.Context, string, *testenv.Cluster, client.Client, *proc.Output) {
	t.Helper()
	bin := buildReloader(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	cluster, cl := startCluster(t, ctx, testenv.Options{Rollouts: true, Nodes: 1})
	out := outputLoggedOnFailure(t)
	for _, n := range []string{ns, own} {
		testutil.Must(t, cluster.EnsureNamespace(ctx, cl, n))
	}
	return ctx, bin, cluster, cl, out
}
