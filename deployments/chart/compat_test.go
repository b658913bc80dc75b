package chart_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/reloader-operator/reloader/deployments/render"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// renderRelease renders the chart as release rel in ns, for a cluster serving servedAPIs.
func renderRelease(t *testing.T, doc, rel, ns string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := render.Chart(chartDir(), values(t, doc), rel, ns, servedAPIs...)
	if err != nil {
		t.Fatalf("render %q as %s: %v", doc, rel, err)
	}
	return objs
}

// everything enables each optional object of the chart.
const everything = `reloader:
  service: {port: 9090}
  serviceMonitor: {enabled: true}
  podMonitor: {enabled: true, bearerTokenSecret: {name: scraper, key: token}}
  podDisruptionBudget: {enabled: true}
  admissionPolicy: {enabled: true}
  secureMetrics: true
  enableHA: true
  netpol: {enabled: true}
  verticalPodAutoscaler: {enabled: true}
  prometheusRule: {enabled: true}
  grafanaDashboard: {enabled: true}
  webhookUrl: https://hooks.example/x
`

// Upstream's names, whatever the release is called, so that `helm upgrade` of an upstream
// release replaces its objects instead of adding a second reloader beside them.
func TestNamesAreUpstreams(t *testing.T) {
	for _, tt := range []struct{ release, values, fullname string }{
		{"reloader", ``, "reloader-reloader"},
		{"cfg", ``, "cfg-reloader"},
		{"my-reloader", ``, "my-reloader-reloader"},
		{"cfg", `nameOverride: Watcher`, "cfg-watcher"},
		{"cfg", `fullnameOverride: reloader`, "reloader"},
		{strings.Repeat("r", 53), `nameOverride: abcdefghijk`, strings.Repeat("r", 53) + "-abcdefghi"}, // cut at 63
		{strings.Repeat("r", 53), `nameOverride: abcdefgh-xyz`, strings.Repeat("r", 53) + "-abcdefgh"}, // and no trailing "-"
	} {
		objs := renderRelease(t, tt.values+"\n"+everything, tt.release, namespace)
		for _, kind := range []string{"Deployment", "Service", "ServiceAccount", "NetworkPolicy", "PodDisruptionBudget", "VerticalPodAutoscaler", "ServiceMonitor"} {
			if render.Find(objs, kind, tt.fullname) == nil {
				t.Errorf("release %s, %q: no %s %s", tt.release, tt.values, kind, tt.fullname)
			}
		}
		for kind, name := range map[string]string{"ClusterRole": tt.fullname + "-role", "ClusterRoleBinding": tt.fullname + "-role-binding"} {
			if render.Find(objs, kind, name) == nil {
				t.Errorf("release %s, %q: no %s %s", tt.release, tt.values, kind, name)
			}
		}
		for _, o := range objs {
			if n := o.GetName(); !strings.HasPrefix(n, tt.fullname) && o.GetKind() != "CustomResourceDefinition" {
				t.Errorf("release %s: %s %s is not named after %s", tt.release, o.GetKind(), n, tt.fullname)
			}
		}
	}
	scoped := renderChart(t, `reloader: {watchGlobally: false}`)
	if render.Find(scoped, "Role", fullname+"-role") == nil || render.Find(scoped, "RoleBinding", fullname+"-role-binding") == nil {
		t.Errorf("watchGlobally false: no Role %[1]s-role and RoleBinding %[1]s-role-binding", fullname)
	}
}

// The pod selector is upstream's exactly (a Deployment's selector is immutable: an upgrade
// that changed it would fail), and every object carries upstream's labels.
func TestSelectorAndLabelsAreUpstreams(t *testing.T) {
	doc := everything + `  matchLabels: {team: platform, owner: "{{ .Release.Name }}-owner"}
  deployment:
    labels: {provider: stakater, rel: "{{ .Release.Name }}"}
    annotations: {note: "{{ .Release.Namespace }}"}
    pod: {annotations: {podnote: "{{ .Release.Name }}"}}
`
	objs := renderRelease(t, doc, "cfg", "ops")
	selector := map[string]string{"app": "cfg-reloader", "release": "cfg", "team": "platform", "owner": "cfg-owner"}
	common := map[string]string{
		"app.kubernetes.io/name": "reloader", "app.kubernetes.io/instance": "cfg",
		"helm.sh/chart": "reloader-0.1.0", "chart": "reloader-0.1.0",
		"heritage": "Helm", "app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/version": "0.1.0",
	}
	maps.Copy(common, selector)

	d := &appsv1.Deployment{}
	testutil.Must(t, k8sruntime.DefaultUnstructuredConverter.FromUnstructured(render.Find(objs, "Deployment", "cfg-reloader").Object, d))
	if !maps.Equal(d.Spec.Selector.MatchLabels, selector) {
		t.Errorf("Deployment selector %v, want %v", d.Spec.Selector.MatchLabels, selector)
	}
	for _, kind := range []string{"PodDisruptionBudget", "NetworkPolicy"} {
		o := render.Find(objs, kind, "cfg-reloader")
		path := []string{"spec", "selector", "matchLabels"}
		if kind == "NetworkPolicy" {
			path = []string{"spec", "podSelector", "matchLabels"}
		}
		if got, _, _ := unstructured.NestedStringMap(o.Object, path...); !maps.Equal(got, selector) {
			t.Errorf("%s selector %v, want %v", kind, got, selector)
		}
	}
	for _, o := range objs {
		for k, v := range common {
			if got := o.GetLabels()[k]; got != v {
				t.Errorf("%s %s: label %s = %q, want %q", o.GetKind(), o.GetName(), k, got, v)
			}
		}
	}
	pod := d.Spec.Template.Labels
	for k, v := range common {
		if pod[k] != v {
			t.Errorf("pod label %s = %q, want %q", k, pod[k], v)
		}
	}
	if pod["provider"] != "stakater" || pod["rel"] != "cfg" {
		t.Errorf("pod labels %v, want deployment.labels through tpl (provider: stakater, rel: cfg)", pod)
	}
	if d.Annotations["note"] != "ops" || d.Spec.Template.Annotations["podnote"] != "cfg" {
		t.Errorf("annotations %v and pod annotations %v, want them through tpl", d.Annotations, d.Spec.Template.Annotations)
	}

	// The Service selects the pods; the ServiceMonitor selects the Service.
	svc := render.Find(objs, "Service", "cfg-reloader")
	sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
	if !labels.SelectorFromSet(sel).Matches(labels.Set(pod)) {
		t.Errorf("Service selector %v does not select the pods %v", sel, pod)
	}
	sm := render.Find(objs, "ServiceMonitor", "cfg-reloader")
	smSel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if !labels.SelectorFromSet(smSel).Matches(labels.Set(svc.GetLabels())) {
		t.Errorf("ServiceMonitor selector %v does not select the Service's labels %v", smSel, svc.GetLabels())
	}
}

// HA spreads the replicas over nodes, preferred, by the release's instance label.
func TestHAAntiAffinityOnInstance(t *testing.T) {
	d, _ := container(t, renderChart(t, `reloader: {enableHA: true, deployment: {replicas: 2}}`))
	a := d.Spec.Template.Spec.Affinity
	if a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Fatalf("affinity %+v, want one preferred pod anti-affinity term", a)
	}
	term := a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
	if term.TopologyKey != "kubernetes.io/hostname" || !maps.Equal(term.LabelSelector.MatchLabels, map[string]string{"app.kubernetes.io/instance": release}) {
		t.Errorf("anti-affinity term %+v, want app.kubernetes.io/instance=%s per hostname", term, release)
	}
	if a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		t.Error("anti-affinity is required; upstream's is preferred (a one-node cluster still runs both)")
	}
}

// The value namespace moves every namespaced object, and the RBAC subjects with them.
func TestNamespaceValue(t *testing.T) {
	objs := renderChart(t, everything+"namespace: elsewhere\n")
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding": // cluster-scoped
			continue
		}
		if o.GetNamespace() != "elsewhere" {
			t.Errorf("%s %s in namespace %q, want elsewhere", o.GetKind(), o.GetName(), o.GetNamespace())
		}
	}
	b := render.Find(objs, "ClusterRoleBinding", fullname+"-role-binding")
	subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
	if ns := subjects[0].(map[string]any)["namespace"]; ns != "elsewhere" {
		t.Errorf("ClusterRoleBinding subject in %v, want elsewhere", ns)
	}
}

// Pod spec keys of upstream's values that reach the pod as upstream renders them.
func TestPodSpecKeys(t *testing.T) {
	objs := renderChart(t, `reloader:
  deployment: {hostUsers: false, runtimeClassName: gvisor, schedulerName: bin-packer, automountServiceAccountToken: false}
  serviceAccount: {automountServiceAccountToken: false}`)
	d, _ := container(t, objs)
	s := d.Spec.Template.Spec
	if s.HostUsers == nil || *s.HostUsers || s.RuntimeClassName == nil || *s.RuntimeClassName != "gvisor" || s.SchedulerName != "bin-packer" {
		t.Errorf("pod spec hostUsers %v, runtimeClassName %v, schedulerName %q; want false, gvisor, bin-packer", s.HostUsers, s.RuntimeClassName, s.SchedulerName)
	}
	if s.AutomountServiceAccountToken == nil || *s.AutomountServiceAccountToken {
		t.Errorf("pod automountServiceAccountToken %v, want false", s.AutomountServiceAccountToken)
	}
	sa := render.Find(objs, "ServiceAccount", fullname)
	if v, ok, _ := unstructured.NestedBool(sa.Object, "automountServiceAccountToken"); !ok || v {
		t.Errorf("ServiceAccount automountServiceAccountToken %v (set %v), want false", v, ok)
	}
	d, _ = container(t, renderChart(t, ``))
	if s := d.Spec.Template.Spec; s.HostUsers != nil || s.RuntimeClassName != nil || s.SchedulerName != "" {
		t.Errorf("defaults set hostUsers %v, runtimeClassName %v, schedulerName %q; want none", s.HostUsers, s.RuntimeClassName, s.SchedulerName)
	}
}

// Upstream's leader election values (PR 1206), as its values file spells them.
func TestLeaderElectionTimings(t *testing.T) {
	_, c := container(t, renderChart(t, `reloader: {enableHA: true, leaderElection: {leaseDuration: 15s, renewDeadline: 10s, retryPeriod: 2s}}`))
	for _, a := range []string{"--leader-election-lease-duration=15s", "--leader-election-renew-deadline=10s", "--leader-election-retry-period=2s"} {
		if !hasArg(c, a) {
			t.Errorf("no arg %s in %q", a, c.Args)
		}
	}
}

// A namespaced install, as upstream's chart makes it: no cluster-scoped object at all (a
// namespace admin can install it), and the cluster-wide filters left out.
func TestScopedInstalls(t *testing.T) {
	for _, tt := range []struct {
		values     string
		namespaces string // --namespaces; "" for none
		roles      []string
	}{
		{`reloader: {watchGlobally: false, namespaceSelector: "env=test", ignoreNamespaces: kube-system}`, "", []string{namespace}},
		{`reloader: {watchGlobally: false, namespaces: [b, a], namespaceSelector: "env=test", ignoreNamespaces: kube-system}`, "a,b," + namespace, []string{"a", "b", namespace}},
		{`reloader: {watchGlobally: false, namespaces: "` + namespace + `,a"}`, "a," + namespace, []string{"a", namespace}},
	} {
		objs := renderChart(t, tt.values)
		_, c := container(t, objs)
		conf := parseOptions(t, objs)
		for _, kind := range []string{"ClusterRole", "ClusterRoleBinding"} {
			if o := render.Find(objs, kind, ""); o != nil {
				t.Errorf("%s: renders %s %s; a namespaced install has none", tt.values, kind, o.GetName())
			}
		}
		for _, prefix := range []string{"--namespace-selector", "--namespaces-to-ignore"} {
			if v, ok := argWithPrefix(c, prefix); ok {
				t.Errorf("%s: passes %s%s to a namespaced install", tt.values, prefix, v)
			}
		}
		if conf.NamespaceLabels != nil && !conf.NamespaceLabels.Empty() {
			t.Errorf("%s: the binary reads namespace selector %v", tt.values, conf.NamespaceLabels)
		}
		got, ok := argWithPrefix(c, "--namespaces=")
		if tt.namespaces == "" && ok || tt.namespaces != "" && got != tt.namespaces {
			t.Errorf("%s: --namespaces=%q (given %v), want %q", tt.values, got, ok, tt.namespaces)
		}
		var roles []string
		for _, r := range render.OfKind(objs, "Role") {
			if r.GetName() == fullname+"-role" {
				roles = append(roles, r.GetNamespace())
			}
		}
		slices.Sort(roles)
		if !slices.Equal(roles, tt.roles) {
			t.Errorf("%s: Roles %s-role in %v, want %v", tt.values, fullname, roles, tt.roles)
		}
	}
}

// Cluster-wide, namespaceSelector is passed as upstream's chart writes it, in double quotes
// that the binary takes off.
func TestNamespaceSelectorQuoted(t *testing.T) {
	objs := renderChart(t, `reloader: {namespaceSelector: "env=test,team in (a,b)"}`)
	_, c := container(t, objs)
	if !hasArg(c, `--namespace-selector="env=test,team in (a,b)"`) {
		t.Errorf("args %q, want --namespace-selector in double quotes", c.Args)
	}
	if got := parseOptions(t, objs).NamespaceLabels.String(); got != "env=test,team in (a,b)" {
		t.Errorf("the binary reads the selector as %q", got)
	}
}

// Without the Prometheus Operator's or the VPA's API the objects of those APIs are left out
// (the install would fail on them), and asking for them is no error.
func TestOptionalAPIs(t *testing.T) {
	kinds := map[string]string{"ServiceMonitor": monitoringAPI, "PodMonitor": monitoringAPI, "PrometheusRule": monitoringAPI, "VerticalPodAutoscaler": vpaAPI}
	for _, apis := range [][]string{nil, {monitoringAPI}, {vpaAPI}, servedAPIs} {
		objs, err := render.Chart(chartDir(), values(t, everything), release, namespace, apis...)
		if err != nil {
			t.Fatalf("APIs %v: %v", apis, err)
		}
		for kind, api := range kinds {
			want := slices.Contains(apis, api)
			if got := render.Find(objs, kind, fullname) != nil; got != want {
				t.Errorf("APIs %v: %s rendered %v, want %v", apis, kind, got, want)
			}
		}
		if render.Find(objs, "ConfigMap", fullname+"-dashboard") == nil {
			t.Errorf("APIs %v: no dashboard ConfigMap (it needs no API)", apis)
		}
	}
}

// serviceMonitor.enabled without service: the Service it scrapes through comes with it,
// instead of a ServiceMonitor with nothing to select; without the API, neither.
func TestServiceMonitorBringsItsService(t *testing.T) {
	objs := renderChart(t, `reloader: {serviceMonitor: {enabled: true}}`)
	svc, sm := render.Find(objs, "Service", fullname), render.Find(objs, "ServiceMonitor", fullname)
	if svc == nil || sm == nil {
		t.Fatalf("Service %v, ServiceMonitor %v; want both", svc != nil, sm != nil)
	}
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	if len(ports) != 1 || ports[0].(map[string]any)["name"] != "http" {
		t.Errorf("Service ports %v, want the http port the ServiceMonitor scrapes", ports)
	}
	objs, err := render.Chart(chartDir(), values(t, `reloader: {serviceMonitor: {enabled: true}}`), release, namespace)
	testutil.Must(t, err)
	if render.Find(objs, "Service", "") != nil || render.Find(objs, "ServiceMonitor", "") != nil {
		t.Error("without monitoring.coreos.com/v1: a Service or ServiceMonitor rendered for serviceMonitor.enabled")
	}
}
