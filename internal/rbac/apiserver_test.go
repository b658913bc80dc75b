package rbac_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/app"
	"github.com/reloader-operator/reloader/internal/metainfo"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/rbac"
	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testenv/clustertest"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/testutil/records"
)

// A real kube-apiserver proves the table: reloader runs as a user granted exactly
// rbac.For(options), does its work, and no request of it is refused. The optional APIs
// (Argo Rollouts, the CSI driver, OpenShift) are served through the project's test CRDs.
var (
	cluster *testenv.Cluster
	admin   client.Client
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	clustertest.Main(m, testenv.Options{
		CRDDirectoryPaths: []string{filepath.Join("..", "..", "test", "crds"), filepath.Join("..", "..", "deployments", "chart", "reloader", "files", "crds")},
	}, func(c *testenv.Cluster) (err error) {
		cluster = c
		scheme := runtime.NewScheme()
		_ = clientgoscheme.AddToScheme(scheme)
		_ = v1alpha1.AddToScheme(scheme)
		admin, err = client.New(c.Config, client.Options{Scheme: scheme})
		return err
	})
}

// TestTableSufficesOnARealAPIServer: for each option set, reloader granted only the table's
// rules syncs its caches, reloads each kind it handles, writes its meta-info ConfigMap (and
// Lease, with HA), and is refused nothing.
func TestTableSufficesOnARealAPIServer(t *testing.T) {
	tests := []struct {
		name       string
		args       func(watched string) []string
		nsLabels   map[string]string
		platform   rbac.Platform
		kinds      []string // reloaded kinds to check
		cronJobRun bool     // a CronJob reload starts a Job
		webhook    bool     // notify instead of reloading: nothing is written
		// noStatus grants the table less the ReloaderConfig status patch (a Role written
		// before it existed): reloads go on, the status is not written, nothing is refused.
		noStatus bool
	}{
		// First: a cluster-wide run sees the namespaces of the runs before it, being deleted.
		{name: "sharded", args: func(string) []string {
			return []string{"--shards=3", "--ignored-workload-types=deploymentconfigs,jobs,cronjobs"}
		}, kinds: []string{"Deployment"}},
		{name: "cluster-wide", args: func(string) []string { return []string{"--ignored-workload-types=deploymentconfigs"} },
			kinds: []string{"Deployment", "Job", "CronJob"}},
		{name: "namespaced", args: func(ns string) []string {
			return []string{"--namespaces=" + ns, "--ignored-workload-types=deploymentconfigs", "--reload-strategy=annotations"}
		}, kinds: []string{"Deployment", "Job", "CronJob"}},
		{name: "HA, namespace selector, CronJob runs, Jobs ignored", args: func(string) []string {
			return []string{"--enable-ha", "--leader-election-id=rbac-test-lock", "--namespace-selector=team:a",
				"--ignored-workload-types=jobs,deploymentconfigs", "--run-cronjobs-on-reload"}
		}, nsLabels: map[string]string{"team": "a"}, kinds: []string{"Deployment", "CronJob"}, cronJobRun: true},
		{name: "Argo, CSI and OpenShift APIs, Secrets ignored", args: func(string) []string {
			return []string{"--is-Argo-Rollouts", "--enable-csi-integration", "--resources-to-ignore=secrets"}
		}, platform: rbac.Platform{OpenShift: true}, kinds: []string{"Deployment"}},
		{name: "RBAC without the ReloaderConfig status", args: func(string) []string {
			return []string{"--ignored-workload-types=deploymentconfigs,jobs,cronjobs"}
		}, kinds: []string{"Deployment"}, noStatus: true},
		{name: "webhook", args: func(string) []string {
			return []string{"--ignored-workload-types=deploymentconfigs"}
		}, kinds: []string{"Deployment"}, webhook: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			watched := namespace(t, tt.nsLabels)
			own := namespace(t, nil)
			args := tt.args(watched)
			var posts atomic.Int32
			if tt.webhook {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.Copy(io.Discard, r.Body)
					posts.Add(1)
				}))
				t.Cleanup(srv.Close)
				args = append(args, "--webhook-url="+srv.URL)
			}
			opts := parse(t, args, map[string]string{"POD_NAMESPACE": own, "POD_NAME": "reloader-0", "RELOADER_NAMESPACE": own})
			rules := rbac.For(opts, tt.platform)
			if tt.noStatus {
				rules.Watched = slices.DeleteFunc(rules.Watched, func(r rbacv1.PolicyRule) bool {
					return slices.Contains(r.Resources, "reloaderconfigs/status")
				})
			}

			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: watched, Name: "cfg"}, Data: map[string]string{"k": "v1"}}
			workloads := workloadsUsing(watched, "cfg", tt.kinds)
			testutil.Must(t, admin.Create(ctx, cm))
			// A ReloaderConfig is read, and (unless notifying) its status written.
			rc := &v1alpha1.ReloaderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: watched, Name: "rbac"},
				Spec: v1alpha1.ReloaderConfigSpec{Targets: []v1alpha1.Target{{Kind: "Deployment", Name: "deployment"}},
					Sources: []v1alpha1.Source{{Kind: "ConfigMap", Auto: true}}}}
			testutil.Must(t, admin.Create(ctx, rc))
			for _, w := range workloads {
				testutil.Must(t, admin.Create(ctx, w))
			}

			refused := runAs(t, opts, rules, own)
			if tt.webhook {
				// The notifier remembers the hashes it starts with: reloader idle after its
				// start has taken them.
				clustertest.Settled(t)
				workloads = nil
			}
			for _, w := range workloads {
				testutil.Eventually(t, "record on "+w.GetName(), func() error {
					testutil.Must(t, admin.Get(ctx, client.ObjectKeyFromObject(w), w))
					// Recorded on the workload, or in the ledger of first records.
					if ok, err := records.Recorded(ctx, admin, w); err != nil || !ok {
						return fmt.Errorf("not recorded yet (%v)", err)
					}
					return nil
				})
			}
			before := map[string]*corev1.PodTemplateSpec{}
			uids := map[string]string{}
			for _, w := range workloads {
				before[w.GetName()] = template(w).DeepCopy()
				uids[w.GetName()] = string(w.GetUID())
			}

			cm.Data["k"] = "v2"
			testutil.Must(t, admin.Update(ctx, cm))

			for _, w := range workloads {
				testutil.Eventually(t, "reload of "+w.GetName(), func() error {
					if err := admin.Get(ctx, client.ObjectKeyFromObject(w), w); err != nil {
						return err
					}
					if _, isJob := w.(*batchv1.Job); isJob && string(w.GetUID()) == uids[w.GetName()] {
						return fmt.Errorf("Job not replaced yet")
					}
					if equality.Semantic.DeepEqual(template(w), before[w.GetName()]) {
						return fmt.Errorf("template unchanged")
					}
					return nil
				})
			}
			if len(workloads) > 0 {
				testutil.Eventually(t, "a Reloaded Event", func() error { return hasEvent(ctx, watched, "Reloaded") })
				if !tt.noStatus {
					testutil.Eventually(t, "the ReloaderConfig's status", func() error {
						testutil.Must(t, admin.Get(ctx, client.ObjectKeyFromObject(rc), rc))
						if rc.Status.ObservedGeneration != rc.Generation || rc.Status.TargetCount != 1 {
							return fmt.Errorf("status %+v", rc.Status)
						}
						return nil
					})
				}
			}
			if tt.noStatus {
				// Quiet for longer than the status controller's delay (1 s), had it run.
				testutil.SettleFor(t, 2*time.Second, "reloader", testutil.Quiet(clustertest.InProcessMetrics))
				testutil.Must(t, admin.Get(ctx, client.ObjectKeyFromObject(rc), rc))
				if rc.Status.ObservedGeneration != 0 {
					t.Errorf("status written without the RBAC for it: %+v", rc.Status)
				}
			}
			if tt.cronJobRun {
				testutil.Eventually(t, "a Job started from the CronJob", func() error {
					jobs := &batchv1.JobList{}
					testutil.Must(t, admin.List(ctx, jobs, client.InNamespace(watched)))
					if len(jobs.Items) == 0 {
						return fmt.Errorf("no Job")
					}
					return nil
				})
			}
			if tt.webhook {
				testutil.Eventually(t, "a webhook POST", func() error {
					if posts.Load() == 0 {
						return fmt.Errorf("none yet")
					}
					return nil
				})
			}
			testutil.Eventually(t, "the meta-info ConfigMap", func() error {
				return admin.Get(ctx, client.ObjectKey{Namespace: own, Name: metainfo.Name}, &corev1.ConfigMap{})
			})
			if opts.EnableHA {
				testutil.Eventually(t, "the Lease", func() error {
					return admin.Get(ctx, client.ObjectKey{Namespace: own, Name: opts.LeaderElectionID}, &coordinationv1.Lease{})
				})
			}
			// Events are written in the background: reloader idle, its counters and its
			// requests to the API server still.
			testutil.Settle(t, "reloader", testutil.QuietRequests(clustertest.InProcessMetrics))
			if r := refused(); len(r) > 0 {
				t.Errorf("with the rules of internal/rbac, %d requests were refused:\n  %s\nrules: %v",
					len(r), strings.Join(r, "\n  "), rbac.Grants(slices.Concat(rules.Watched, rules.Cluster, rules.Own)))
			}
		})
	}
}

func parse(t *testing.T, args []string, env map[string]string) options.Config {
	t.Helper()
	o := options.Default()
	fs := pflag.NewFlagSet("reloader", pflag.ContinueOnError)
	o.BindFlags(fs)
	testutil.Must(t, fs.Parse(args))
	o.MetricsAddr, o.V2HealthAddr = "0", "0"
	o.CoalesceWindow = 100 * time.Millisecond
	c, err := options.Load(o, func(k string) string { return env[k] })
	testutil.Must(t, err)
	return c
}

// runAs grants rules to a new user, as the chart would (a ClusterRole, or a Role per watched
// namespace; cluster-scoped rules in a ClusterRole; own rules in a Role in own), and runs
// reloader as that user until the test ends. refused lists the requests answered 403.
func runAs(t *testing.T, opts options.Config, rules rbac.Rules, own string) (refused func() []string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	user := fmt.Sprintf("reloader-rbac-%04d", rand.IntN(10000))
	cfg, _, err := cluster.AddUser(user)
	testutil.Must(t, err)
	grant(t, user, "", "watched", rules.Watched, rules.Namespaces)
	grant(t, user, "", "cluster", rules.Cluster, nil)
	grant(t, user, own, "own", rules.Own, []string{own})

	rec := &forbidden{}
	cfg.WrapTransport = rec.wrap
	mgr, err := app.New(ctx, cfg, opts, logr.Discard())
	testutil.Must(t, err)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("reloader stopped with error: %v", err)
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("requests refused: %v", rec.list())
		}
	})
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		t.Fatalf("caches did not sync; refused: %v", rec.list())
	}
	return rec.list
}

// grant binds rules to user: in a Role in each of namespaces, or, with none, in a ClusterRole.
func grant(t *testing.T, user, own, purpose string, rules []rbacv1.PolicyRule, namespaces []string) {
	t.Helper()
	if len(rules) == 0 {
		return
	}
	ctx := context.Background()
	name := user + "-" + purpose
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	var objs []client.Object
	if len(namespaces) == 0 {
		objs = append(objs,
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}})
	}
	for _, ns := range namespaces {
		objs = append(objs,
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}})
	}
	for _, o := range objs {
		testutil.Must(t, admin.Create(ctx, o))
		t.Cleanup(func() { _ = admin.Delete(context.Background(), o) })
	}
	// The authorizer sees new bindings through its own informers: wait until it does, so
	// that a refusal counted later is the table's fault, not a race with the test.
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	for _, ns := range namespaces {
		for _, r := range rules {
			attrs := &authorizationv1.ResourceAttributes{Namespace: ns, Group: r.APIGroups[0], Resource: r.Resources[0], Verb: r.Verbs[0]}
			if len(r.ResourceNames) > 0 {
				attrs.Name = r.ResourceNames[0]
			}
			testutil.Eventually(t, "RBAC in effect for "+user, func() error {
				sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: attrs}}
				if err := admin.Create(ctx, sar); err != nil {
					return err
				}
				if !sar.Status.Allowed {
					return fmt.Errorf("%+v not allowed yet", *attrs)
				}
				return nil
			})
		}
	}
}

// forbidden records the requests the API server refuses.
type forbidden struct {
	mu   sync.Mutex
	reqs []string
}

func (f *forbidden) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && resp.StatusCode == http.StatusForbidden {
			f.mu.Lock()
			f.reqs = append(f.reqs, req.Method+" "+req.URL.Path)
			f.mu.Unlock()
		}
		return resp, err
	})
}

func (f *forbidden) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Clone(f.reqs)
	slices.Sort(out)
	return slices.Compact(out)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func namespace(t *testing.T, labels map[string]string) string {
	t.Helper()
	name := fmt.Sprintf("rbac-%04d", rand.IntN(10000))
	testutil.Must(t, cluster.EnsureNamespace(context.Background(), admin, name))
	if labels != nil {
		ns := &corev1.Namespace{}
		testutil.Must(t, admin.Get(context.Background(), client.ObjectKey{Name: name}, ns))
		ns.Labels = labels
		testutil.Must(t, admin.Update(context.Background(), ns))
	}
	t.Cleanup(func() {
		_ = admin.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	return name
}

// workloadsUsing returns one auto-reloaded workload of each kind, using ConfigMap cm.
func workloadsUsing(ns, cm string, kinds []string) []client.Object {
	auto := map[string]string{"reloader.stakater.com/auto": "true"}
	spec := corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
		Name: "app", Image: "busybox",
		EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}},
	}}}
	labels := map[string]string{"app": "rbac-test"}
	var out []client.Object
	for _, kind := range kinds {
		meta := metav1.ObjectMeta{Namespace: ns, Name: strings.ToLower(kind), Annotations: auto}
		switch kind {
		case "Deployment":
			s := *spec.DeepCopy()
			s.RestartPolicy = corev1.RestartPolicyAlways
			out = append(out, &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: s}}})
		case "Job":
			out = append(out, &batchv1.Job{ObjectMeta: meta, Spec: batchv1.JobSpec{
				Template: corev1.PodTemplateSpec{Spec: *spec.DeepCopy()}}})
		case "CronJob":
			out = append(out, &batchv1.CronJob{ObjectMeta: meta, Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *",
				JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: *spec.DeepCopy()}}}}})
		}
	}
	return out
}

func template(obj client.Object) *corev1.PodTemplateSpec {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return &o.Spec.Template
	case *batchv1.Job:
		return &o.Spec.Template
	case *batchv1.CronJob:
		return &o.Spec.JobTemplate.Spec.Template
	}
	panic(fmt.Sprintf("no template for %T", obj))
}

func hasEvent(ctx context.Context, ns, reason string) error {
	events := &eventsv1.EventList{}
	if err := admin.List(ctx, events, client.InNamespace(ns)); err != nil {
		return err
	}
	for _, e := range events.Items {
		if e.Reason == reason {
			return nil
		}
	}
	return fmt.Errorf("no %s Event in %s", reason, ns)
}
