package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/reloader-operator/reloader/internal/metainfo"
	"github.com/reloader-operator/reloader/internal/notify"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil"
)

func setLabel(t *testing.T, ns, key, value string) {
	t.Helper()
	update(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, func(n *corev1.Namespace) {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		if value == "" {
			delete(n.Labels, key)
		} else {
			n.Labels[key] = value
		}
	})
}

func TestNamespaceSelectorTakesEffectWithoutRestart(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	d := deployment(ns, "web", map[string]string{"reloader.stakater.com/auto": "true"}, podSpec("cfg"))
	create(t, cm, d)
	startReloader(t, ns, func(o *options.Options) { o.NamespaceSelector = "reloader:enabled" })
	changes := templateChanges(t, d)

	changeConfig(t, cm, "v2")
	handled(t, d, cm)
	if n := changes(); n != 0 {
		t.Fatalf("workload in an unselected namespace reloaded %d times", n)
	}
	if _, ok := get(t, d).Annotations[reload.RecordAnnotation]; ok {
		t.Fatal("workload in an unselected namespace was written to")
	}

	setLabel(t, ns, "reloader", "enabled")
	recorded(t, d) // selected now: taken as it is, no reload
	changeConfig(t, cm, "v3")
	testutil.Eventually(t, "reload once selected", func() error {
		if n := changes(); n != 1 {
			return fmt.Errorf("%d template changes", n)
		}
		return nil
	})

	setLabel(t, ns, "reloader", "")
	handled(t, d, namespaceObj(ns))
	changeConfig(t, cm, "v4")
	handled(t, d, cm)
	if n := changes(); n != 1 {
		t.Errorf("%d template changes after the label was removed, want still 1", n)
	}
}

// hookServer records the --webhook-url documents it receives; it fails the first failures.
type hookServer struct {
	mu       sync.Mutex
	failures int
	got      []notify.Change
}

func (h *hookServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failures > 0 {
		h.failures--
		http.Error(w, "try later", http.StatusServiceUnavailable)
		return
	}
	var c notify.Change
	if err := json.NewDecoder(r.Body).Decode(&c); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.got = append(h.got, c)
}

func (h *hookServer) changes() []notify.Change {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]notify.Change(nil), h.got...)
}

func TestWebhookURLNotifiesInsteadOfReloading(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	unrelated := configMap(ns, "other", map[string]string{"k": "v1"})
	d := deployment(ns, "web", map[string]string{"reloader.stakater.com/auto": "true"}, podSpec("cfg"))
	create(t, cm, unrelated, d)
	hook := &hookServer{failures: 2} // the first delivery is retried
	srv := httptest.NewServer(hook)
	defer srv.Close()
	started := time.Now()
	startReloader(t, ns, func(o *options.Options) {
		o.WebhookURL = srv.URL
		o.WebhookRetries = 1 // each failure goes back to the workqueue's backoff
	})
	changes := templateChanges(t, d)
	notifierHandled(t, cm, started) // first sight
	notifierHandled(t, unrelated, started)
	if got := hook.changes(); len(got) != 0 {
		t.Fatalf("notified at start-up: %+v", got)
	}

	changed := time.Now()
	changeConfig(t, unrelated, "v2")
	changeConfig(t, cm, "v2")
	testutil.Eventually(t, "webhook notified", func() error {
		if got := hook.changes(); len(got) != 1 {
			return fmt.Errorf("%d notifications", len(got))
		}
		return nil
	})
	c := hook.changes()[0]
	if c.Kind != "ConfigMap" || c.Namespace != ns || c.Name != "cfg" || c.Hash == "" ||
		len(c.Workloads) != 1 || c.Workloads[0] != (notify.Workload{Kind: "Deployment", Namespace: ns, Name: "web"}) {
		t.Errorf("notification %+v", c)
	}
	// In webhook mode no workload is reconciled: the notifier's handling of both changes is
	// the sign.
	notifierHandled(t, cm, changed)
	notifierHandled(t, unrelated, changed)
	if n := changes(); n != 0 {
		t.Errorf("workload reloaded %d times in webhook mode", n)
	}
	if len(hook.changes()) != 1 {
		t.Errorf("notified %d times for one change", len(hook.changes()))
	}
}

func TestAlertsAfterReload(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bodies []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b map[string]any
		_ = json.NewDecoder(r.Body).Decode(&b)
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
	}))
	defer srv.Close()
	ns, cm, d, _ := autoDeployment(t, func(o *options.Options) {
		o.Alert = options.Alert{Enabled: true, Sink: "raw", WebhookURL: srv.URL, AdditionalInfo: "test cluster"}
	})
	changeConfig(t, cm, "v2")
	testutil.Eventually(t, "alert received", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(bodies) != 1 {
			return fmt.Errorf("%d alerts", len(bodies))
		}
		return nil
	})
	w := bodies[0]["workload"].(map[string]any)
	if w["name"] != d.Name || w["namespace"] != ns || bodies[0]["additionalInfo"] != "test cluster" {
		t.Errorf("alert %v", bodies[0])
	}
}

func TestFailingAlertSinkNeverBlocksReloads(t *testing.T) {
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
	defer srv.Close()
	defer close(hang)
	_, cm, d, _ := autoDeployment(t, func(o *options.Options) {
		o.Alert = options.Alert{Enabled: true, Sink: "slack", WebhookURL: srv.URL}
		o.WebhookTimeout = time.Minute
	})
	changes := templateChanges(t, d)
	for i := range 3 {
		changeConfig(t, cm, fmt.Sprintf("v%d", i+2))
		testutil.Eventually(t, "reload despite a hanging alert sink", func() error {
			if n := changes(); n != i+1 {
				return fmt.Errorf("%d template changes", n)
			}
			return nil
		})
	}
}

// counter reads one series of a counter from controller-runtime's registry.
func counter(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	testutil.Must(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue series
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// One reload counts once in reloader's own series and in upstream's, under upstream's labels.
func TestMetricsCountReloadsAndOutcomes(t *testing.T) {
	series := []struct {
		name   string
		labels map[string]string
	}{
		{"reloader_workload_action_total", map[string]string{"kind": "Deployment", "action": "reload"}},
		{"reloader_workload_reconcile_total", map[string]string{"kind": "Deployment", "outcome": "reloaded"}},
		{"reloader_reload_executed_total", map[string]string{"success": "true"}},
		{"reloader_action_total", map[string]string{"workload_kind": "Deployment", "result": "success"}},
	}
	read := func() []float64 {
		var out []float64
		for _, s := range series {
			out = append(out, counter(t, s.name, s.labels))
		}
		return out
	}
	before := read()
	_, cm, d, _ := autoDeployment(t)
	changes := templateChanges(t, d)
	changeConfig(t, cm, "v2")
	testutil.Eventually(t, "reloaded", func() error {
		if n := changes(); n != 1 {
			return fmt.Errorf("%d template changes", n)
		}
		return nil
	})
	testutil.Eventually(t, "counted", func() error {
		after := read()
		for i := range after {
			if after[i]-before[i] != 1 {
				return fmt.Errorf("%s: %v -> %v", series[i].name, before[i], after[i])
			}
		}
		return nil
	})
	families, err := crmetrics.Registry.Gather()
	testutil.Must(t, err)
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
	}
	for _, want := range []string{"rest_client_requests_total", "reloader_change_to_patch_seconds", "reloader_workload_reconcile_duration_seconds",
		"reloader_action_latency_seconds", "reloader_reconcile_duration_seconds", "reloader_workqueue_latency_seconds"} {
		if !slices.Contains(names, want) {
			t.Errorf("metric %s not exposed", want)
		}
	}
}

func TestMetaInfoConfigMap(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	startReloader(t, ns, func(o *options.Options) {
		o.ReloaderNamespace = ns
		o.ReloaderDeployment = "reloader"
		o.ReloadStrategy = reload.StrategyAnnotations
	})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: metainfo.Name}}
	testutil.Eventually(t, "meta-info ConfigMap", func() error { return k8s.Get(context.Background(), client.ObjectKeyFromObject(cm), cm) })
	if cm.Labels[metainfo.LabelKey] != metainfo.LabelValue {
		t.Errorf("labels %v", cm.Labels)
	}
	var build metainfo.Build
	var opts map[string]string
	var dep metav1.ObjectMeta
	testutil.Must(t, json.Unmarshal([]byte(cm.Data["buildInfo"]), &build))
	testutil.Must(t, json.Unmarshal([]byte(cm.Data[metainfo.KeyFlags]), &opts))
	var upstreamOpts metainfo.ReloaderOptions
	testutil.Must(t, json.Unmarshal([]byte(cm.Data["reloaderOptions"]), &upstreamOpts))
	testutil.Must(t, json.Unmarshal([]byte(cm.Data["deploymentInfo"]), &dep))
	if !strings.HasPrefix(build.GoVersion, "go") || opts["reload-strategy"] != reload.StrategyAnnotations || upstreamOpts.ReloadStrategy != reload.StrategyAnnotations ||
		opts["namespaces"] != "["+ns+"]" || dep.Name != "reloader" || dep.Namespace != ns {
		t.Errorf("meta-info %+v %v %+v", build, opts, dep)
	}
}

func TestNamespacedInstallWithoutClusterRole(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	user := "reloader-" + ns
	cfg, err := addUser(user)
	testutil.Must(t, err)
	read := []string{"get", "list", "watch"}
	write := append([]string{"patch", "update"}, read...)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reloader"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: read},
		// The Secret hash key: with no own namespace, kept in the first watched one.
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets", "daemonsets"}, Verbs: write},
		// Job replacements are written down as ControllerRevisions first.
		{APIGroups: []string{"apps"}, Resources: []string{"controllerrevisions"}, Verbs: []string{"list", "watch", "create", "delete"}},
		{APIGroups: []string{"batch"}, Resources: []string{"cronjobs", "jobs"}, Verbs: append([]string{"create", "delete"}, write...)},
		{APIGroups: []string{"apps.openshift.io"}, Resources: []string{"deploymentconfigs"}, Verbs: write},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
	}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reloader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "reloader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	d := deployment(ns, "web", map[string]string{"reloader.stakater.com/auto": "true"}, podSpec("cfg"))
	create(t, role, binding, cm, d)

	startReloaderAs(t, cfg, ns)
	recorded(t, d)
	changes := templateChanges(t, d)
	changeConfig(t, cm, "v2")
	testutil.Eventually(t, "reload with namespace-scoped RBAC only", func() error {
		if n := changes(); n != 1 {
			return fmt.Errorf("%d template changes", n)
		}
		return nil
	})
	eventuallyEvent(t, ns, "web", "Reloaded")
}
