package installtest

import (
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/reloader-operator/reloader/deployments/render"
	"github.com/reloader-operator/reloader/internal/testutil"
)

func TestUpgradeLostLabels(t *testing.T) {
	upstream := map[string]string{"app": "reloader-reloader", "release": "reloader", "helm.sh/chart": "reloader-2.2.16", "provider": "stakater"}
	for _, tc := range []struct {
		name string
		got  map[string]string
		want []string
	}{
		{"kept, one added, chart version changed", map[string]string{"app": "reloader-reloader", "release": "reloader", "helm.sh/chart": "reloader-0.2.0", "provider": "stakater", "extra": "x"}, nil},
		{"dropped", map[string]string{"app": "reloader-reloader", "release": "reloader", "helm.sh/chart": "reloader-2.2.16"}, []string{"provider=stakater dropped"}},
		{"changed", map[string]string{"app": "reloader", "release": "reloader", "helm.sh/chart": "reloader-2.2.16", "provider": "stakater"}, []string{"app=reloader-reloader changed to reloader"}},
	} {
		if got := lostLabels(upstream, tc.got); !slices.Equal(got, tc.want) {
			t.Errorf("%s: lostLabels = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestUpgradeFixtureIsUpstreamsChart checks the stand-ins for upstream's charts (2.2.16, and
// 3.0.0-beta.1 with chart set) against the facts read off upstream's: names, selector, the
// args, env and image its values give.
func TestUpgradeFixtureIsUpstreamsChart(t *testing.T) {
	for _, tc := range []struct {
		name, release string
		chart         string // the stand-in under testdata; upstreamChart2 when empty
		values        map[string]any
		objects       []string // Kind namespace/name, in any order
		selector      map[string]string
		args, env     []string // present in the container (env by name)
		noEnv         []string // absent from the container
		image         string
	}{
		{name: "defaults", release: "reloader",
			objects: []string{"ServiceAccount rel/reloader-reloader", "ClusterRole /reloader-reloader-role", "ClusterRoleBinding /reloader-reloader-role-binding",
				"Role rel/reloader-reloader-metadata-role", "RoleBinding rel/reloader-reloader-metadata-role-binding", "Deployment rel/reloader-reloader"},
			selector: map[string]string{"app": "reloader-reloader", "release": "reloader"},
			args:     []string{"--log-level=info"}, env: []string{"RELOADER_NAMESPACE", "RELOADER_DEPLOYMENT_NAME"}},
		{name: "fullnameOverride", release: "cfg", values: map[string]any{"fullnameOverride": "reloader"},
			objects: []string{"ServiceAccount rel/reloader", "ClusterRole /reloader-role", "ClusterRoleBinding /reloader-role-binding",
				"Role rel/reloader-metadata-role", "RoleBinding rel/reloader-metadata-role-binding", "Deployment rel/reloader"},
			selector: map[string]string{"app": "reloader", "release": "cfg"}},
		{name: "namespaced", release: "cfg", values: reloaderValues(map[string]any{"watchGlobally": false}),
			objects: []string{"ServiceAccount rel/cfg-reloader", "Role rel/cfg-reloader-role", "RoleBinding rel/cfg-reloader-role-binding",
				"Role rel/cfg-reloader-metadata-role", "RoleBinding rel/cfg-reloader-metadata-role-binding", "Deployment rel/cfg-reloader"},
			env: []string{"KUBERNETES_NAMESPACE"}},
		{name: "namespaces", release: "cfg", values: reloaderValues(map[string]any{"watchGlobally": false, "namespaces": "b, a"}),
			objects: []string{"ServiceAccount rel/cfg-reloader", "Role a/cfg-reloader-role", "Role b/cfg-reloader-role", "Role rel/cfg-reloader-role",
				"RoleBinding a/cfg-reloader-role-binding", "RoleBinding b/cfg-reloader-role-binding", "RoleBinding rel/cfg-reloader-role-binding",
				"Role rel/cfg-reloader-metadata-role", "RoleBinding rel/cfg-reloader-metadata-role-binding", "Deployment rel/cfg-reloader"},
			args: []string{"--namespaces=a,b,rel"}},
		{name: "namespaceSelector", release: "cfg", values: reloaderValues(map[string]any{"namespaceSelector": "env=prod", "enableHA": true, "matchLabels": map[string]any{"team": "{{ .Release.Name }}"}}),
			selector: map[string]string{"app": "cfg-reloader", "release": "cfg", "team": "cfg"},
			args:     []string{`--namespace-selector="env=prod"`, "--enable-ha=true"}, env: []string{"POD_NAME", "POD_NAMESPACE"}},
		{name: "chart3 defaults", release: "reloader", chart: upstreamChart3,
			objects: []string{"ServiceAccount rel/reloader-reloader", "ClusterRole /reloader-reloader-role", "ClusterRoleBinding /reloader-reloader-role-binding",
				"Role rel/reloader-reloader-metadata-role", "RoleBinding rel/reloader-reloader-metadata-role-binding", "Deployment rel/reloader-reloader"},
			selector: map[string]string{"app": "reloader-reloader", "release": "reloader"},
			args:     []string{"--log-level=info"}, env: []string{"RELOADER_NAMESPACE", "RELOADER_DEPLOYMENT_NAME"},
			image: "ghcr.io/stakater/reloader:v2.0.0-beta.1"},
		// Chart 3 passes the release namespace as --namespaces, not KUBERNETES_NAMESPACE.
		{name: "chart3 namespaced", release: "cfg", chart: upstreamChart3, values: reloaderValues(map[string]any{"watchGlobally": false}),
			objects: []string{"ServiceAccount rel/cfg-reloader", "Role rel/cfg-reloader-role", "RoleBinding rel/cfg-reloader-role-binding",
				"Role rel/cfg-reloader-metadata-role", "RoleBinding rel/cfg-reloader-metadata-role-binding", "Deployment rel/cfg-reloader"},
			args: []string{"--namespaces=rel"}, noEnv: []string{"KUBERNETES_NAMESPACE"}},
		// Chart 3 watches exactly the listed namespaces: no Role in the release's but the metadata one.
		{name: "chart3 namespaces", release: "cfg", chart: upstreamChart3, values: reloaderValues(map[string]any{"watchGlobally": false, "namespaces": "b, a"}),
			objects: []string{"ServiceAccount rel/cfg-reloader", "Role a/cfg-reloader-role", "Role b/cfg-reloader-role",
				"RoleBinding a/cfg-reloader-role-binding", "RoleBinding b/cfg-reloader-role-binding",
				"Role rel/cfg-reloader-metadata-role", "RoleBinding rel/cfg-reloader-metadata-role-binding", "Deployment rel/cfg-reloader"},
			args: []string{"--namespaces=a,b"}},
		{name: "chart3 namespaceSelector", release: "cfg", chart: upstreamChart3, values: reloaderValues(map[string]any{"namespaceSelector": "env=prod"}),
			selector: map[string]string{"app": "cfg-reloader", "release": "cfg"},
			args:     []string{"--namespace-selector=env=prod"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chart := tc.chart
			if chart == "" {
				chart = upstreamChart2
			}
			objs, err := render.Decode(templateChart(t, loadStandIn(t, chart), tc.values, tc.release, "rel").Manifest)
			testutil.Must(t, err)
			var got []string
			for _, o := range objs {
				ns := o.GetNamespace()
				got = append(got, o.GetKind()+" "+ns+"/"+o.GetName())
			}
			if tc.objects != nil {
				want := slices.Clone(tc.objects)
				slices.Sort(want)
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Errorf("objects\n got %q\nwant %q", got, want)
				}
			}
			d, c := reloaderContainer(t, objs)
			if tc.selector != nil && !maps.Equal(d.Spec.Selector.MatchLabels, tc.selector) {
				t.Errorf("selector %v, want %v", d.Spec.Selector.MatchLabels, tc.selector)
			}
			if lost := lostLabels(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels); lost != nil {
				t.Errorf("the pod labels miss the selector's: %v", lost)
			}
			for _, a := range tc.args {
				if !slices.Contains(c.Args, a) {
					t.Errorf("args %q lack %q", c.Args, a)
				}
			}
			for _, name := range tc.env {
				if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name }) {
					t.Errorf("env lacks %s", name)
				}
			}
			for _, name := range tc.noEnv {
				if slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name }) {
					t.Errorf("env has %s", name)
				}
			}
			if tc.image != "" && c.Image != tc.image {
				t.Errorf("image %s, want %s", c.Image, tc.image)
			}
		})
	}
}
