package controller_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/app"
	"github.com/reloader-operator/reloader/internal/extapi"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// One real kube-apiserver + etcd for the package; each test gets its own namespace and its
// own reloader scoped to it, so tests never see each other's objects.
var (
	cluster    *testenv.Cluster
	restConfig *rest.Config
	k8s        client.Client
)

func TestMain(m *testing.M) {
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
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
	return name
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
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := app.New(ctx, cfg, conf, testLogger())
	testutil.Must(t, err)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
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

// settle gives reloader time to act on a change it should ignore: well past the coalescing
// window and a round trip of events.
func settle() { time.Sleep(1500 * time.Millisecond) }

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
	testutil.Eventually(t, "record annotation written", func() error {
		o := get(t, obj)
		if _, ok := o.GetAnnotations()[reload.RecordAnnotation]; !ok {
			return fmt.Errorf("no %s on %s", reload.RecordAnnotation, o.GetName())
		}
		return nil
	})
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
// The template is at spec.template unless path says otherwise.
func templateChanges(t *testing.T, obj client.Object, path ...string) func() int {
	if len(path) == 0 {
		path = []string{"spec", "template"}
	}
	t.Helper()
	gvk, err := apiutil.GVKForObject(obj, k8s.Scheme())
	testutil.Must(t, err)
	wc, err := client.NewWithWatch(restConfig, client.Options{Scheme: k8s.Scheme()})
	testutil.Must(t, err)
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	ctx, cancel := context.WithCancel(context.Background())
	w, err := wc.Watch(ctx, list, client.InNamespace(obj.GetNamespace()),
		client.MatchingFields{"metadata.name": obj.GetName()})
	testutil.Must(t, err)
	var mu sync.Mutex
	changes, last := 0, ""
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			tpl, _, _ := unstructured.NestedMap(u.Object, path...)
			b, _ := json.Marshal(tpl)
			mu.Lock()
			if last != "" && string(b) != last {
				changes++
			}
			last = string(b)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.Stop(); cancel(); <-done })
	testutil.Eventually(t, "watch started", func() error {
		mu.Lock()
		defer mu.Unlock()
		if last == "" {
			return errors.New("no initial event")
		}
		return nil
	})
	return func() int {
		mu.Lock()
		defer mu.Unlock()
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
