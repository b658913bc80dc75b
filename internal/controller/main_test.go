package controller_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/app"
	"github.com/reloader-operator/reloader/internal/controller/generic"
	follow "github.com/reloader-operator/reloader/internal/controller/rollout"
	"github.com/reloader-operator/reloader/internal/controller/webhook"
	"github.com/reloader-operator/reloader/internal/extapi"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/testutil/follower"
	"github.com/reloader-operator/reloader/internal/testutil/records"
)

// One real kube-apiserver + etcd for the package; each test gets its own namespace and its
// own reloader scoped to it, so tests never see each other's objects.
var (
	cluster    *testenv.Cluster
	restConfig *rest.Config
	k8s        client.Client
)

// parallel is how many tests marked t.Parallel run at once unless -test.parallel says: an
// envtest mostly waits (on the API server, on reloader's windows), so more than the cores.
// The tests that time reloader, read the process's metrics or load the control plane run
// alone, before them.
const parallel = 4

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(parallel))
	}
	var err error
	cluster, err = testenv.Start(context.Background(), testenv.Options{
		CRDDirectoryPaths: []string{filepath.Join("..", "..", "test", "crds"), filepath.Join("..", "..", "deployments", "chart", "reloader", "files", "crds")},
		// OpenShift's default: setting blockOwnerDeletion needs update on the owner's
		// finalizers. Admins are allowed anything; tests running reloader as a user of its
		// own RBAC meet it (admission_test.go).
		APIServerFlags: map[string]string{"enable-admission-plugins": "OwnerReferencesPermissionEnforcement"},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start control plane:", err)
		os.Exit(1)
	}
	restConfig = cluster.Config
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), extapi.AddToScheme(scheme), v1alpha1.AddToScheme(scheme)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s, err = client.New(restConfig, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = cluster.Stop()
	os.Exit(code)
}

// addUser is cluster.AddUser for tests that run side by side: the control plane's CA counts
// the certificates it signs without a lock.
func addUser(name string) (*rest.Config, error) {
	usersMu.Lock()
	defer usersMu.Unlock()
	cfg, _, err := cluster.AddUser(name)
	return cfg, err
}

var usersMu sync.Mutex

func testLogger() logr.Logger {
	if os.Getenv("RELOADER_TEST_LOG") != "" {
		return zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr), zap.Level(zapcore.Level(-2)))
	}
	return logr.Discard()
}

var invalidNameChars = regexp.MustCompile(`[^a-z0-9-]+`)

// newNamespace creates a namespace named after the test.
func newNamespace(t *testing.T) string {
	t.Helper()
	name := invalidNameChars.ReplaceAllString(strings.ToLower(t.Name()), "-")
	if len(name) > 50 {
		name = name[len(name)-50:] // the end names the subtest
	}
	name = fmt.Sprintf("%s-%04d", strings.Trim(name, "-"), rand.IntN(10000))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	testutil.Must(t, k8s.Create(context.Background(), ns))
	t.Cleanup(func() { emptyNamespace(t, name); _ = k8s.Delete(context.Background(), ns) })
	return name
}

// idleControlPlane waits, before a test that times reloader, until the API server has no
// request in hand but the one asking (apiserver_current_inflight_requests): what an earlier
// test left to do must not count against this one's figures.
func idleControlPlane(t *testing.T) {
	t.Helper()
	hc, err := rest.HTTPClientFor(restConfig)
	testutil.Must(t, err)
	quiet := 0
	testutil.Eventually(t, "an idle control plane", func() error {
		resp, err := hc.Get(restConfig.Host + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		inflight := 0.0
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, "apiserver_current_inflight_requests{") {
				v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
				inflight += v
			}
		}
		if inflight > 1 { // the scrape itself
			quiet = 0
			return fmt.Errorf("%v requests in flight", inflight)
		}
		if quiet++; quiet < 3 {
			return errors.New("idle for less than three looks")
		}
		return nil
	})
}

// namespaced are the kinds the tests create in their namespaces.
var namespaced = []client.Object{
	&appsv1.Deployment{}, &appsv1.StatefulSet{}, &appsv1.DaemonSet{}, &appsv1.ReplicaSet{},
	&appsv1.ControllerRevision{}, &batchv1.Job{}, &batchv1.CronJob{}, &corev1.ConfigMap{},
	&corev1.Secret{}, &corev1.ServiceAccount{}, &eventsv1.Event{}, &coordinationv1.Lease{},
	&rbacv1.Role{}, &rbacv1.RoleBinding{}, &v1alpha1.ReloaderConfig{}, &extapi.Rollout{},
	&extapi.DeploymentConfig{}, &extapi.SecretProviderClassPodStatus{},
}

// emptyNamespace deletes what a test left in ns. The control plane runs no namespace
// controller: a deleted namespace keeps its objects, in etcd and in the API server's watch
// cache, for the rest of the package's run.
func emptyNamespace(t *testing.T, ns string) {
	var wg sync.WaitGroup
	for _, o := range namespaced {
		wg.Go(func() {
			err := k8s.DeleteAllOf(context.Background(), o.DeepCopyObject().(client.Object), client.InNamespace(ns),
				client.PropagationPolicy(metav1.DeletePropagationBackground))
			if err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
				t.Logf("emptying %s of %T: %v", ns, o, err)
			}
		})
	}
	wg.Wait()
}

// startReloader runs reloader in-process, watching only ns, until the test ends or stop is called.
func startReloader(t *testing.T, ns string, configure ...func(*options.Options)) (stop func()) {
	t.Helper()
	return startReloaderAs(t, restConfig, ns, configure...)
}

// startReloaderAs is startReloader with the credentials of cfg.
func startReloaderAs(t *testing.T, cfg *rest.Config, ns string, configure ...func(*options.Options)) (stop func()) {
	t.Helper()
	opts := options.Default()
	opts.Namespaces = []string{ns}
	opts.MetricsAddr, opts.V2HealthAddr = "0", "0"
	opts.CoalesceWindow = 100 * time.Millisecond
	for _, c := range configure {
		c(&opts)
	}
	conf, err := options.Parse(opts)
	testutil.Must(t, err)
	rel := &running{}
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := app.New(ctx, cfg, conf, testLogger(), func(p app.Parts) error {
		p.Metrics.Hook = rel.ended
		return nil
	})
	testutil.Must(t, err)
	rel.mgr = mgr
	watched := opts.Namespaces
	if len(watched) == 0 {
		watched = []string{ns}
	}
	reloaders.add(rel, watched)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		reloaders.remove(rel, watched)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("reloader stopped with error: %v", err)
		}
	}
	t.Cleanup(stop)
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		t.Fatal("reloader cache did not sync")
	}
	return stop
}

// running is a reloader a test started: its manager, and the workload reconciles it ended.
type running struct {
	mgr manager.Manager
	mu  sync.Mutex
	log []metrics.Reconcile
}

func (r *running) ended(rec metrics.Reconcile) {
	r.mu.Lock()
	r.log = append(r.log, rec)
	r.mu.Unlock()
}

// decidedSince reports whether a reconcile of the workload that began after since has ended
// with a decision: not a wait (coalescing window, caches) or a conflict, which come back to
// decide. (A failed write is the decision carried out, and failing: its retries decide the
// same.)
func (r *running) decidedSince(kind string, nn types.NamespacedName, since time.Time) error {
	return r.endedSince(kind, nn, since, false)
}

// endedSince is decidedSince, counting any outcome when waits is set.
func (r *running) endedSince(kind string, nn types.NamespacedName, since time.Time, waits bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var last []string
	for _, rec := range r.log {
		if rec.Kind != kind || rec.Namespace != nn.Namespace || rec.Name != nn.Name || !rec.Started.After(since) {
			continue
		}
		switch {
		case waits:
			return nil
		case rec.Outcome == metrics.OutcomeWaiting, rec.Outcome == metrics.OutcomeConflict,
			rec.Kind == webhook.NotifierKind && rec.Outcome == metrics.OutcomeError:
			last = append(last, rec.Outcome)
		default:
			return nil
		}
	}
	return fmt.Errorf("no reconcile of %s %s begun since %s has decided (outcomes since: %v)", kind, nn, since.Format(time.StampMilli), last)
}

// outcomesSince are the outcomes of the reconciles of the workload that began after since and
// have ended, in the order they ended.
func (r *running) outcomesSince(kind string, nn types.NamespacedName, since time.Time) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.log {
		if rec.Kind == kind && rec.Namespace == nn.Namespace && rec.Name == nn.Name && rec.Started.After(since) {
			out = append(out, rec.Outcome)
		}
	}
	return out
}

// reloaders are the running reloaders by namespace watched: a test's own, in its namespaces.
var reloaders = runningSet{by: map[string]*running{}}

type runningSet struct {
	mu sync.Mutex
	by map[string]*running
}

func (s *runningSet) add(r *running, namespaces []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ns := range namespaces {
		s.by[ns] = r
	}
}

func (s *runningSet) remove(r *running, namespaces []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ns := range namespaces {
		if s.by[ns] == r {
			delete(s.by, ns)
		}
	}
}

func (s *runningSet) in(ns string) *running {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.by[ns]
}

// pokeAnnotation is the annotation handled writes on a workload to have it reconciled:
// metadata reloader decides nothing from.
const pokeAnnotation = "test.reloader.dev/poke"

// handled waits until the reloader running in w's namespace has handled what the test wrote
// last: its cache holds the current version of w and of each object in written (or their
// absence), and a reconcile of w that began after that has ended with a decision. So that a
// reconcile begins then, handled writes pokeAnnotation on w, a change reloader ignores (its
// resourceVersion moves; its generation and template do not).
//
// It is the wait before a check that nothing happened: whatever reloader does about the
// objects written, it has done when handled returns (a reconcile is level-based: a later one
// of the same objects decides the same), so the check cannot pass for being early.
func handled(t *testing.T, w client.Object, written ...client.Object) {
	t.Helper()
	handledAll(t, []client.Object{w}, written...)
}

// handledAll is handled for each of workloads, which share a namespace; their pokes go out
// together.
func handledAll(t *testing.T, workloads []client.Object, written ...client.Object) {
	t.Helper()
	reconciledAll(t, false, workloads, written...)
}

// waitedOn is handled for a workload whose reload waits on something other than time or its
// sources (an install key not loaded yet): any reconcile counts, a wait included.
func waitedOn(t *testing.T, w client.Object, written ...client.Object) {
	t.Helper()
	reconciledAll(t, true, []client.Object{w}, written...)
}

func reconciledAll(t *testing.T, waits bool, workloads []client.Object, written ...client.Object) {
	t.Helper()
	if len(workloads) == 0 {
		return
	}
	rel := reloaders.in(workloads[0].GetNamespace())
	if rel == nil {
		t.Fatalf("handled: no reloader running in %s", workloads[0].GetNamespace())
	}
	for _, o := range append(slices.Clone(written), workloads...) {
		rel.holds(t, o)
	}
	since := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(workloads))
	sem := make(chan struct{}, 8)
	for _, w := range workloads {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs <- poke(w)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		testutil.Must(t, err)
	}
	for _, w := range workloads {
		gvk, err := apiutil.GVKForObject(w, k8s.Scheme())
		testutil.Must(t, err)
		nn := client.ObjectKeyFromObject(w)
		testutil.Eventually(t, "reloader handled "+gvk.Kind+" "+nn.String(), func() error {
			return rel.endedSince(gvk.Kind, nn, since, waits)
		})
	}
}

// objects are xs as client.Objects, for handledAll.
func objects[T client.Object](xs ...T) []client.Object {
	out := make([]client.Object, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

// followed waits until reloader's rollout follower has read w as the API server has it now:
// it pokes w (see handled) and waits for a reconcile of the follower begun after. w must be
// followed (reloaded, its rollout not yet over): the follower hears of nothing else.
func followed(t *testing.T, w client.Object) {
	t.Helper()
	rel := reloaders.in(w.GetNamespace())
	if rel == nil {
		t.Fatalf("followed: no reloader running in %s", w.GetNamespace())
	}
	rel.holds(t, w)
	since := time.Now()
	testutil.Must(t, poke(w))
	gvk, err := apiutil.GVKForObject(w, k8s.Scheme())
	testutil.Must(t, err)
	nn := client.ObjectKeyFromObject(w)
	testutil.Eventually(t, "the rollout follower read "+nn.String(), func() error {
		return rel.endedSince(follow.FollowerKind(gvk.Kind), nn, since, true)
	})
}

// quietSpan is how long a test that checks that something stays idle watches it: the idle
// span is the subject there, not a wait for work to finish.
const quietSpan = 1500 * time.Millisecond

// notifierHandled is handled for the webhook notifier of --webhook-url, which reconciles
// sources, not workloads: it waits for a reconcile of src (a ConfigMap or Secret) begun after
// since, a time the test took before what it waits on (the start, a change), that did not
// fail.
func notifierHandled(t *testing.T, src client.Object, since time.Time) {
	t.Helper()
	rel := reloaders.in(src.GetNamespace())
	if rel == nil {
		t.Fatalf("handled: no reloader running in %s", src.GetNamespace())
	}
	kind := source.ConfigMap
	if _, ok := src.(*corev1.Secret); ok {
		kind = source.Secret
	}
	nn := types.NamespacedName{Namespace: src.GetNamespace(), Name: source.ID{Kind: kind, Name: src.GetName()}.String()}
	testutil.Eventually(t, "the notifier handled "+nn.String(), func() error {
		return rel.decidedSince(webhook.NotifierKind, nn, since)
	})
}

// pokeLabel is the label genericHandled writes on a source to have the configs naming it
// reconciled: the generic targets' controller hears of a source's content and labels only.
const pokeLabel = "test.reloader.dev/poke"

// genericHandled is handled for the generic targets of config (in src's namespace), whose
// reconciles read sources and targets live: it waits for a reconcile of the config begun once
// reloader's cache held the config and src as they are now, which it brings about by writing
// pokeLabel on src, a source the config names.
func genericHandled(t *testing.T, config string, src *corev1.ConfigMap) {
	t.Helper()
	rel := reloaders.in(src.Namespace)
	if rel == nil {
		t.Fatalf("handled: no reloader running in %s", src.Namespace)
	}
	cfg := &v1alpha1.ReloaderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: src.Namespace, Name: config}}
	rel.holds(t, cfg)
	rel.holds(t, src)
	since := time.Now()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"%d"}}}`, pokeLabel, pokes.Add(1))
	testutil.Must(t, k8s.Patch(context.Background(), src.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch))))
	nn := client.ObjectKeyFromObject(cfg)
	testutil.Eventually(t, "reloader handled the generic targets of "+nn.String(), func() error {
		return rel.decidedSince(generic.HookKind, nn, since)
	})
}

// handledSince is handled for a workload a poke cannot reach (a Job whose replacement waits,
// a kind read without watch): it waits for a reconcile of it begun after since, as a test
// that took since before what it waits on (the Event, the counter, the roll) knows that one
// began then.
func handledSince(t *testing.T, kind string, nn types.NamespacedName, since time.Time) {
	t.Helper()
	rel := reloaders.in(nn.Namespace)
	if rel == nil {
		t.Fatalf("handled: no reloader running in %s", nn.Namespace)
	}
	testutil.Eventually(t, "reloader handled "+kind+" "+nn.String(), func() error {
		return rel.decidedSince(kind, nn, since)
	})
}

// poke writes pokeAnnotation on obj, a new value each time.
func poke(obj client.Object) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"%d"}}}`, pokeAnnotation, pokes.Add(1))
	o := obj.DeepCopyObject().(client.Object)
	return k8s.Patch(context.Background(), o, client.RawPatch(types.MergePatchType, []byte(patch)))
}

var pokes atomic.Int64

// holds waits until r's cache holds obj as the API server has it now, or knows it is gone.
func (r *running) holds(t *testing.T, obj client.Object) {
	t.Helper()
	ctx := context.Background()
	key := client.ObjectKeyFromObject(obj)
	cur := obj.DeepCopyObject().(client.Object)
	err := k8s.Get(ctx, key, cur)
	gone := apierrors.IsNotFound(err)
	if !gone {
		testutil.Must(t, err)
	}
	testutil.Eventually(t, "reloader's cache holds "+key.String()+" as written", func() error {
		in := obj.DeepCopyObject().(client.Object)
		err := r.mgr.GetCache().Get(ctx, key, in)
		var notCached *cache.ErrResourceNotCached
		switch {
		case errors.As(err, &notCached):
			return nil // a kind reloader does not read (its options ignore it): it hears nothing of it
		case gone && apierrors.IsNotFound(err):
			return nil
		case gone && err == nil:
			return errors.New("still cached")
		case err != nil:
			return err
		case !follower.AtLeast(in.GetResourceVersion(), cur.GetResourceVersion()):
			return fmt.Errorf("cached at resourceVersion %s, written %s", in.GetResourceVersion(), cur.GetResourceVersion())
		}
		return nil
	})
}

// unwritten reports how the object differs from before, other than by the writes of handled
// (pokeAnnotation): its labels, annotations, spec and data. (Not its generation: a
// Deployment's moves with its annotations, the poke's included.)
func unwritten(t *testing.T, before client.Object) error {
	t.Helper()
	after := get(t, before.DeepCopyObject().(client.Object))
	if a, b := unpoked(t, after), unpoked(t, before); !apiequality.Semantic.DeepEqual(a, b) {
		return fmt.Errorf("resourceVersion %s -> %s:\n%v\n->\n%v", before.GetResourceVersion(), after.GetResourceVersion(), b, a)
	}
	return nil
}

// unpoked is obj as a map without its resourceVersion, generation, managed fields, status and
// pokeAnnotation.
func unpoked(t *testing.T, obj client.Object) map[string]any {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	testutil.Must(t, err)
	delete(u, "status")
	md, _ := u["metadata"].(map[string]any)
	delete(md, "resourceVersion")
	delete(md, "generation")
	delete(md, "managedFields")
	if ann, ok := md["annotations"].(map[string]any); ok {
		delete(ann, pokeAnnotation)
		if len(ann) == 0 {
			delete(md, "annotations")
		}
	}
	return u
}

// namespaceObj names namespace ns, for handled.
func namespaceObj(ns string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
}

func configMap(ns, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

func secret(ns, name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// podSpec builds a spec with an "app" container using envFrom the given ConfigMaps, and a
// "sidecar" container that uses nothing.
func podSpec(configMaps ...string) corev1.PodTemplateSpec {
	app := corev1.Container{Name: "app", Image: "busybox"}
	for _, cm := range configMaps {
		app.EnvFrom = append(app.EnvFrom, corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}})
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "test"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{app, {Name: "sidecar", Image: "busybox"}}},
	}
}

func deployment(ns, name string, annotations map[string]string, tpl corev1.PodTemplateSpec) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: tpl.Labels},
			Template: tpl,
		},
	}
}

func get[T client.Object](t *testing.T, obj T) T {
	t.Helper()
	testutil.Must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	return obj
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		testutil.Must(t, k8s.Create(context.Background(), o))
	}
}

// update re-reads obj, applies change and writes it back.
func update[T client.Object](t *testing.T, obj T, change func(T)) {
	t.Helper()
	testutil.Must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	change(obj)
	testutil.Must(t, k8s.Update(context.Background(), obj))
}

// recorded waits until reloader has recorded the workload's sources: it is then watching it.
func recorded(t *testing.T, obj client.Object) {
	t.Helper()
	testutil.Eventually(t, "record written", func() error {
		if _, ok := recordText(t, obj); !ok {
			return fmt.Errorf("no %s on %s, and no entry in a ledger of first records", reload.RecordAnnotation, obj.GetName())
		}
		return nil
	})
}

// recordText is the workload's record as reloader wrote it: on the workload, or in a ledger
// of first records (records.Of).
func recordText(t *testing.T, obj client.Object) (string, bool) {
	t.Helper()
	rec, ok, err := records.Of(context.Background(), k8s, get(t, obj))
	testutil.Must(t, err)
	return rec, ok
}

func envOf(tpl *corev1.PodTemplateSpec, container, name string) (string, bool) {
	for _, c := range tpl.Spec.Containers {
		if c.Name != container {
			continue
		}
		for _, e := range c.Env {
			if e.Name == name {
				return e.Value, true
			}
		}
	}
	return "", false
}

// events returns the reasons of the Events about a workload.
func eventReasons(t *testing.T, ns, name string) []string {
	t.Helper()
	var list eventsv1.EventList
	testutil.Must(t, k8s.List(context.Background(), &list, client.InNamespace(ns)))
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, e.Reason)
		}
	}
	return out
}

// eventuallyEvent waits for an Event with reason about the workload name.
func eventuallyEvent(t *testing.T, ns, name, reason string) {
	t.Helper()
	testutil.Eventually(t, reason+" event on "+name, func() error {
		if got := eventReasons(t, ns, name); !slices.Contains(got, reason) {
			return fmt.Errorf("events: %v", got)
		}
		return nil
	})
}

// templateChanges watches one workload and counts the times its pod template changes, the
// only writes that roll pods. (A Deployment's generation also moves on annotation changes.)
// The template is at spec.template unless path says otherwise. The count is read once the
// watch has caught up with the API server.
func templateChanges(t *testing.T, obj client.Object, path ...string) func() int {
	if len(path) == 0 {
		path = []string{"spec", "template"}
	}
	t.Helper()
	gvk, err := apiutil.GVKForObject(obj, k8s.Scheme())
	testutil.Must(t, err)
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	changes, last := 0, ""
	f := watchObjects(t, list, obj.GetNamespace(), obj.GetName(), func(_ watch.EventType, o client.Object) {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			return
		}
		tpl, _, _ := unstructured.NestedMap(u.Object, path...)
		b, _ := json.Marshal(tpl)
		if last != "" && string(b) != last {
			changes++
		}
		last = string(b)
	})
	return func() int {
		f.CaughtUp(t)
		f.Lock()
		defer f.Unlock()
		return changes
	}
}

// autoDeployment creates, in a new namespace, ConfigMap "cfg" and Deployment "web" with
// the auto annotation reading it, starts reloader and waits until it has recorded "web".
func autoDeployment(t *testing.T, configure ...func(*options.Options)) (ns string, cm *corev1.ConfigMap, d *appsv1.Deployment, stop func()) {
	t.Helper()
	ns = newNamespace(t)
	cm = configMap(ns, "cfg", map[string]string{"k": "v1"})
	d = deployment(ns, "web", map[string]string{"reloader.stakater.com/auto": "true"}, podSpec("cfg"))
	create(t, cm, d)
	stop = startReloader(t, ns, configure...)
	recorded(t, d)
	return ns, cm, d, stop
}
