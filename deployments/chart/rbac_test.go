package chart_test

import (
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/reloader-operator/reloader/deployments/render"
	"github.com/reloader-operator/reloader/internal/rbac"
	"github.com/reloader-operator/reloader/internal/workload"
)

// matrix are the values sets the RBAC and lint tests render.
var matrix = []struct{ name, values string }{
	{"default", ``},
	{"watchGlobally=false", `reloader: {watchGlobally: false}`},
	{"namespaces [a,b]", `reloader: {watchGlobally: false, namespaces: [a, b]}`},
	{"namespaces as CSV", `reloader: {namespaces: "a, b"}`},
	{"HA with 2 replicas", `reloader: {enableHA: true, deployment: {replicas: 2}}`},
	{"sharded over 4 replicas", `reloader: {sharding: {enabled: true, replicas: 4, shards: 16}}`},
	{"CSI", `reloader: {enableCSIIntegration: true}`},
	{"evict", `reloader: {enableEvictStrategy: true}`},
	{"Argo Rollouts", `reloader: {isArgoRollouts: true}`},
	{"OpenShift", `reloader: {isOpenshift: true}`},
	{"Job reloads", `reloader: {reloadJobs: true}`},
	{"Jobs left alone (least privilege)", `reloader: {reloadJobs: false}`},
	{"first records on the workloads", `reloader: {pacing: {firstRecordLedger: false}}`},
	{"Job reloads, namespaced", `reloader: {reloadJobs: true, watchGlobally: false, namespaces: [a]}`},
	{"Job reloads and CronJobs run on reload", `reloader: {reloadJobs: true, runCronJobsOnReload: true}`},
	{"Jobs and CronJobs ignored", `reloader: {ignoreJobs: true, ignoreCronJobs: true}`},
	{"CronJobs run on reload", `reloader: {runCronJobsOnReload: true}`},
	{"Jobs ignored, CronJobs run on reload", `reloader: {ignoreJobs: true, runCronJobsOnReload: true}`},
	{"Secrets ignored", `reloader: {ignoreSecrets: true}`},
	{"ConfigMaps ignored", `reloader: {ignoreConfigMaps: true}`},
	{"annotations strategy", `reloader: {reloadStrategy: annotations}`},
	{"namespace selector", `reloader: {namespaceSelector: "env=test"}`},
	{"namespace selector, namespaced", `reloader: {namespaceSelector: "env:test", namespaces: [a]}`},
	{"namespace selector and ignored namespaces, watchGlobally=false", `reloader: {watchGlobally: false, namespaceSelector: "env=test", ignoreNamespaces: kube-system}`},
	{"webhook", `reloader: {webhookUrl: "https://hooks.example.com/reloader"}`},
	{"webhook from a Secret", `reloader: {webhookUrlSecret: {name: hooks, key: url}}`},
	{"secure metrics", `reloader: {secureMetrics: true}`},
	{"secure metrics, namespaced", `reloader: {secureMetrics: true, watchGlobally: false}`},
	{"plan webhook", `{planWebhook: {enabled: true, certManager: {enabled: true}}, reloader: {enableHA: true, deployment: {replicas: 2}, netpol: {enabled: true}}}`},
	{"plan webhook, token callers", `planWebhook: {enabled: true, clientAuth: {mode: token}}`},
	{"everything", `reloader: {enableHA: true, deployment: {replicas: 3}, enableCSIIntegration: true, isArgoRollouts: true,
		isOpenshift: true, reloadJobs: true, namespaceSelector: "team:*", reloadOnCreate: true, reloadOnDelete: true, autoReloadAll: true,
		leaderElection: {id: my-lock, leaseDuration: 20s, renewDeadline: 15s, retryPeriod: 3s}, coalesceWindow: 1s, workers: 8,
		recreateFinishedJobs: false, enableMetricsByNamespace: true, logFormat: json, logLevel: debug,
		service: {port: 9090}, serviceMonitor: {enabled: true}, podMonitor: {enabled: true, bearerTokenSecret: {name: scraper-token, key: token}}, podDisruptionBudget: {enabled: true},
		netpol: {enabled: true, from: [{podSelector: {}}], to: [{ipBlock: {cidr: 10.0.0.0/8}}]}, verticalPodAutoscaler: {enabled: true},
		grafanaDashboard: {enabled: true}, prometheusRule: {enabled: true}, secureMetrics: true, admissionPolicy: {enabled: true}}`},
}

// TestRBACMatchesTable renders the chart for each values set, parses the container's args and
// env into options as the binary does, and checks that the rendered ClusterRole and Roles grant
// exactly what internal/rbac says those options need, in the right places.
func TestRBACMatchesTable(t *testing.T) {
	for _, m := range matrix {
		t.Run(m.name, func(t *testing.T) {
			objs := renderChart(t, m.values)
			opts := parseOptions(t, objs)
			r, _ := values(t, m.values)["reloader"].(map[string]any)
			openshift, _ := r["isOpenshift"].(bool)
			want := rbac.For(opts, rbac.Platform{OpenShift: openshift})

			roles := map[string][]rbacv1.PolicyRule{} // by "namespace/name"; "" namespace: ClusterRoles
			for _, o := range objs {
				if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
					continue
				}
				if o.GetName() == fullname+"-metrics-reader" || o.GetName() == planWebhook+"-caller" {
					continue // for scrapers and the API server, not reloader (TestMetricsReaderRole, TestPlanWebhookClientAuth)
				}
				var r rbacv1.Role // a ClusterRole's rules decode the same
				fromUnstructured(t, o, &r)
				roles[o.GetNamespace()+"/"+o.GetName()] = r.Rules
			}
			checkBindings(t, objs, roles)

			clusterWide := slices.Concat(want.Cluster)
			if len(want.Namespaces) == 0 {
				clusterWide = slices.Concat(want.Watched, want.Cluster)
			}
			expect := map[string][]string{}
			if len(clusterWide) > 0 {
				expect["/"+fullname+"-role"] = rbac.Grants(clusterWide)
			}
			for _, ns := range want.Namespaces {
				expect[ns+"/"+fullname+"-role"] = rbac.Grants(want.Watched)
			}
			expect[namespace+"/"+fullname+"-metadata-role"] = rbac.Grants(want.Own)

			for key, grants := range expect {
				got, ok := roles[key]
				if !ok {
					t.Errorf("no role %s; rendered roles: %v", key, keys(roles))
					continue
				}
				if g := rbac.Grants(got); !slices.Equal(g, grants) {
					t.Errorf("role %s grants\n  %v\nwant (internal/rbac)\n  %v\nmissing: %v\nextra: %v",
						key, g, grants, minus(grants, g), minus(g, grants))
				}
			}
			for key := range roles {
				if _, ok := expect[key]; !ok {
					t.Errorf("unexpected role %s", key)
				}
			}
		})
	}
}

// TestChartGrantsEveryKind: with every optional kind turned on, the chart's ClusterRole grants
// each workload kind internal/workload describes the verbs it needs (workload.Verbs). A kind
// added there fails here, by name, until the chart's reloader.watchedRules grants it;
// TestRBACMatchesTable then checks the rest of its rules.
func TestChartGrantsEveryKind(t *testing.T) {
	objs := renderChart(t, `reloader: {isArgoRollouts: true, isOpenshift: true, reloadJobs: true}`)
	o := render.Find(objs, "ClusterRole", fullname+"-role")
	if o == nil {
		t.Fatal("no ClusterRole")
	}
	var role rbacv1.ClusterRole
	fromUnstructured(t, o, &role)
	grants := rbac.Grants(role.Rules)
	for _, k := range workload.Known() {
		res := k.Describe().Resource
		for _, v := range workload.Verbs(k, true) {
			if g := res.Group + "/" + res.Resource + ":" + v; !slices.Contains(grants, g) {
				t.Errorf("%s (internal/workload): the chart's reloader.watchedRules does not grant %s", k.Name(), g)
			}
		}
	}
}

// checkBindings requires each role to be bound, by name, to the chart's ServiceAccount only.
func checkBindings(t *testing.T, objs []*unstructured.Unstructured, roles map[string][]rbacv1.PolicyRule) {
	t.Helper()
	bound := map[string]bool{}
	for _, o := range objs {
		if o.GetKind() != "ClusterRoleBinding" && o.GetKind() != "RoleBinding" || o.GetName() == planWebhook+"-caller" {
			continue // the API server's grant (TestPlanWebhookClientAuth)
		}
		var b rbacv1.RoleBinding
		fromUnstructured(t, o, &b)
		ns := o.GetNamespace()
		if b.RoleRef.Kind == "ClusterRole" {
			ns = ""
		}
		bound[ns+"/"+b.RoleRef.Name] = true
		want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: fullname, Namespace: namespace}}
		if !slices.Equal(b.Subjects, want) {
			t.Errorf("%s %s binds %v, want %v", o.GetKind(), o.GetName(), b.Subjects, want)
		}
	}
	for key := range roles {
		if !bound[key] {
			t.Errorf("role %s is bound to nothing", key)
		}
	}
}

func fromUnstructured(t *testing.T, o *unstructured.Unstructured, into any) {
	t.Helper()
	if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// A namespaced install has no ClusterRole, unless a namespace selector needs to read
// Namespaces, which only a ClusterRole can grant.
func TestNamespacedInstallHasNoClusterRole(t *testing.T) {
	for _, doc := range []string{`reloader: {watchGlobally: false}`, `reloader: {namespaces: [a, b]}`} {
		objs := renderChart(t, doc)
		if n := len(render.OfKind(objs, "ClusterRole")) + len(render.OfKind(objs, "ClusterRoleBinding")); n != 0 {
			t.Errorf("%s: %d cluster-scoped RBAC objects", doc, n)
		}
		var where []string
		for _, r := range render.OfKind(objs, "Role") {
			where = append(where, r.GetNamespace()+"/"+r.GetName())
		}
		t.Logf("%s: roles %s", doc, strings.Join(where, ", "))
	}
}

func TestRBACDisabled(t *testing.T) {
	objs := renderChart(t, `reloader: {rbac: {enabled: false}, serviceAccount: {create: false, name: existing}}`)
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount"} {
		if n := len(render.OfKind(objs, kind)); n != 0 {
			t.Errorf("%d %s rendered with rbac.enabled=false", n, kind)
		}
	}
	d, _ := container(t, objs)
	if sa := d.Spec.Template.Spec.ServiceAccountName; sa != "existing" {
		t.Errorf("serviceAccountName = %q, want existing", sa)
	}
}

// With secureMetrics, scrapers need get on /metrics: the chart ships that ClusterRole, as
// internal/rbac's MetricsReader, bound to nobody; without it, no such role.
func TestMetricsReaderRole(t *testing.T) {
	objs := renderChart(t, `reloader: {secureMetrics: true}`)
	o := render.Find(objs, "ClusterRole", fullname+"-metrics-reader")
	if o == nil {
		t.Fatal("no metrics-reader ClusterRole")
	}
	var r rbacv1.ClusterRole
	fromUnstructured(t, o, &r)
	if got, want := rbac.Grants(r.Rules), rbac.Grants(rbac.MetricsReader()); !slices.Equal(got, want) {
		t.Errorf("metrics-reader grants %v, want %v", got, want)
	}
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, b := range render.OfKind(objs, kind) {
			if name, _, _ := unstructured.NestedString(b.Object, "roleRef", "name"); name == o.GetName() {
				t.Errorf("%s %s binds the metrics-reader role", kind, b.GetName())
			}
		}
	}
	if render.Find(renderChart(t, ``), "ClusterRole", fullname+"-metrics-reader") != nil {
		t.Error("metrics-reader rendered without secureMetrics")
	}
}
