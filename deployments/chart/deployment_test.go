package chart_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/reloader-operator/reloader/deployments/render"
)

// TestUpstreamValuesRenderFlags: upstream's values keys render upstream's flags and env, and
// the binary reads them back as the options they mean.
func TestUpstreamValuesRenderFlags(t *testing.T) {
	for _, tt := range []struct {
		values string
		args   []string // must all be present
		env    map[string]string
	}{
		{values: ``, args: []string{"--ignored-workload-types=deploymentconfigs"}},
		{values: `reloader: {reloadJobs: false}`, args: []string{"--ignored-workload-types=jobs,deploymentconfigs"}},
		{values: `reloader: {reloadJobs: true, ignoreJobs: true}`, args: []string{"--ignored-workload-types=jobs,deploymentconfigs"}},
		{values: `reloader: {watchGlobally: false}`, env: map[string]string{"KUBERNETES_NAMESPACE": namespace}},
		{values: `reloader: {watchGlobally: false, namespaces: [b, a, b]}`, args: []string{"--namespaces=a,b," + namespace}},
		{values: `reloader: {watchGlobally: false, namespaces: "b, a,` + namespace + `"}`, args: []string{"--namespaces=a,b," + namespace}},
		{values: `reloader: {ignoreNamespaces: "kube-system,kube-public"}`, args: []string{"--namespaces-to-ignore=kube-system,kube-public"}},
		{values: `reloader: {namespaceSelector: "env=test"}`, args: []string{`--namespace-selector="env=test"`}},
		{values: `reloader: {resourceLabelSelector: "reload:yes"}`, args: []string{"--resource-label-selector=reload:yes"}},
		{values: `reloader: {ignoreSecrets: true}`, args: []string{"--resources-to-ignore=secrets"}},
		{values: `reloader: {ignoreConfigMaps: true}`, args: []string{"--resources-to-ignore=configMaps"}},
		{values: `reloader: {ignoreJobs: true, ignoreCronJobs: true}`, args: []string{"--ignored-workload-types=jobs,cronjobs,deploymentconfigs"}},
		{values: `reloader: {isOpenshift: true, ignoreJobs: true}`, args: []string{"--ignored-workload-types=jobs"}},
		{values: `reloader: {reloadOnCreate: true, reloadOnDelete: true, syncAfterRestart: true, autoReloadAll: true}`,
			args: []string{"--reload-on-create=true", "--reload-on-delete=true", "--sync-after-restart=true", "--auto-reload-all=true"}},
		{values: `reloader: {reloadStrategy: annotations}`, args: []string{"--reload-strategy=annotations"}},
		{values: `reloader: {reloadStrategy: env-vars}`, args: []string{"--reload-strategy=env-vars"}},
		{values: `reloader: {isArgoRollouts: true, enableCSIIntegration: true}`, args: []string{"--is-Argo-Rollouts=true", "--enable-csi-integration=true"}},
		{values: `reloader: {enableEvictStrategy: true}`, args: []string{"--enable-evict-strategy=true"}},
		{values: `reloader: {enableHA: true}`, args: []string{"--enable-ha=true"},
			env: map[string]string{"POD_NAME": podName, "POD_NAMESPACE": namespace}},
		{values: `reloader: {enablePProf: true, pprofAddr: ":7070"}`, args: []string{"--enable-pprof=true", "--pprof-addr=:7070"}},
		{values: `reloader: {enablePProf: true}`, args: []string{"--enable-pprof=true", "--pprof-addr=127.0.0.1:6060"}},
		{values: `reloader: {kubeAPIQPS: 150.5, kubeAPIBurst: 400}`, args: []string{"--kube-api-qps=150.5", "--kube-api-burst=400"}},
		{values: `reloader: {logFormat: json, logLevel: debug}`, args: []string{"--log-format=json", "--log-level=debug"}},
		{values: `reloader: {enableMetricsByNamespace: true}`, env: map[string]string{"METRICS_COUNT_BY_NAMESPACE": "enabled"}},
		{values: `reloader: {custom_annotations: {configmap: a/cm, secret: a/s, auto: a/auto, secret_auto: a/sa, configmap_auto: a/ca,
			search: a/search, match: a/match, ignore: a/ignore, pausePeriod: a/pp, pauseTime: a/pt}}`,
			args: []string{"--configmap-annotation=a/cm", "--secret-annotation=a/s", "--auto-annotation=a/auto",
				"--secret-auto-annotation=a/sa", "--configmap-auto-annotation=a/ca", "--auto-search-annotation=a/search",
				"--search-match-annotation=a/match", "--ignore-annotation=a/ignore", "--pause-deployment-annotation=a/pp",
				"--pause-deployment-time-annotation=a/pt"}},
		{values: `reloader: {coalesceWindow: 2s, rolloutDeadline: 15m, workers: 6, reconcileTimeout: 30s, runCronJobsOnReload: true, recreateFinishedJobs: false,
			enableHA: true, leaderElection: {id: l, leaseDuration: 30s, renewDeadline: 20s, retryPeriod: 5s}}`,
			args: []string{"--coalesce-window=2s", "--rollout-deadline=15m", "--workers=6", "--reconcile-timeout=30s", "--run-cronjobs-on-reload=true", "--recreate-finished-jobs=false",
				"--leader-election-id=l", "--leader-election-lease-duration=30s", "--leader-election-renew-deadline=20s",
				"--leader-election-retry-period=5s"}},
		{values: `reloader: {pacing: {reloadRate: 20, reloadBurst: 5, firstSightRate: 0, minReloadInterval: 10m}}`,
			args: []string{"--reload-rate=20", "--reload-burst=5", "--first-sight-rate=0", "--min-reload-interval=10m"}},
		{values: `reloader: {pacing: {reloadRate: 0.5}}`, args: []string{"--reload-rate=0.5"}},
		{values: `reloader: {pacing: {firstRecordLedger: false}}`, args: []string{"--first-record-ledger=false"}},
		{values: `reloader: {flapBreaker: {maxChanges: 20, window: 30m, quiet: 10m}}`,
			args: []string{"--flap-max-changes=20", "--flap-window=30m", "--flap-quiet=10m"}},
		{values: `reloader: {flapBreaker: {maxChanges: 0}}`, args: []string{"--flap-max-changes=0"}},
		{values: `reloader: {mode: approve}`, args: []string{"--mode=approve"}},
		{values: `reloader: {mode: notify}`, args: []string{"--mode=notify"}},
		{values: `reloader: {genericTargetKinds: []}`, args: []string{"--generic-target-kinds="}},
		{values: `reloader: {genericTargetKinds: [grafana.integreatly.org/Grafana, apps/Deployment]}`,
			args: []string{"--generic-target-kinds=grafana.integreatly.org/Grafana,apps/Deployment"}},
		{values: `reloader: {waves: {minWorkloads: 10}}`, args: []string{"--waves-min-workloads=10"}},
		{values: `reloader: {waves: {minWorkloads: 0}}`, args: []string{"--waves-min-workloads=0"}},
		{values: `reloader: {deployment: {env: {open: {ALERT_ON_RELOAD: "true", ALERT_SINK: slack, ALERT_WEBHOOK_URL: "https://hooks.example.com/a"}, field: {NODE: spec.nodeName}}}}`,
			env: map[string]string{"ALERT_ON_RELOAD": "true", "ALERT_SINK": "slack"}},
	} {
		objs := renderChart(t, tt.values)
		_, c := container(t, objs)
		parseOptions(t, objs) // the binary accepts what the chart renders
		for _, a := range tt.args {
			if !hasArg(c, a) {
				t.Errorf("%s: no arg %s in %q", tt.values, a, c.Args)
			}
		}
		e := env(c)
		for k, v := range tt.env {
			if e[k] != v {
				t.Errorf("%s: env %s = %q, want %q", tt.values, k, e[k], v)
			}
		}
	}
}

func TestDefaultArgsAreMinimal(t *testing.T) {
	_, c := container(t, renderChart(t, ``))
	// Jobs are reloaded as upstream reloads them; reloader.reloadJobs=false leaves them alone.
	if want := []string{"--ignored-workload-types=deploymentconfigs"}; !slices.Equal(c.Args, want) {
		t.Errorf("default args %q, want %q", c.Args, want)
	}
}

// TestContainerContract: what every install gets, whatever the values.
func TestContainerContract(t *testing.T) {
	for _, m := range matrix {
		d, c := container(t, renderChart(t, m.values))
		e := env(c)
		for _, name := range []string{"POD_NAME", "POD_NAMESPACE", "RELOADER_NAMESPACE", "RELOADER_DEPLOYMENT_NAME", "GOMAXPROCS", "GOMEMLIMIT"} {
			if e[name] == "" {
				t.Errorf("%s: env %s not set", m.name, name)
			}
		}
		for _, ev := range c.Env {
			if (ev.Name == "GOMAXPROCS" || ev.Name == "GOMEMLIMIT") && (ev.ValueFrom == nil || ev.ValueFrom.ResourceFieldRef == nil ||
				!strings.HasPrefix(ev.ValueFrom.ResourceFieldRef.Resource, "limits.")) {
				t.Errorf("%s: %s is not taken from the limits: %+v", m.name, ev.Name, ev)
			}
		}
		if len(c.Ports) == 0 || c.Ports[0].ContainerPort != 9090 || c.Ports[0].Name != "http" ||
			slices.ContainsFunc(c.Ports[1:], func(p corev1.ContainerPort) bool { return p.Name != "probes" && p.Name != "plan-webhook" }) {
			t.Errorf("%s: ports %+v, want 9090 named http (and probes, with secureMetrics; plan-webhook, with planWebhook)", m.name, c.Ports)
		}
		if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/live" {
			t.Errorf("%s: liveness probe %+v, want GET /live", m.name, p)
		}
		if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/ready" {
			t.Errorf("%s: readiness probe %+v, want GET /ready", m.name, p)
		}
		sc, psc := c.SecurityContext, d.Spec.Template.Spec.SecurityContext
		switch {
		case sc == nil || psc == nil:
			t.Errorf("%s: no security context", m.name)
		case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem,
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation,
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}),
			psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot, psc.RunAsUser == nil || *psc.RunAsUser != 65532,
			psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
			t.Errorf("%s: security context %+v, pod %+v", m.name, sc, psc)
		}
	}
}

// Without HA a second replica would reload everything twice: replicas are clamped to 1, as
// upstream does; with HA they are spread over nodes.
func TestReplicas(t *testing.T) {
	d, _ := container(t, renderChart(t, `reloader: {deployment: {replicas: 3}}`))
	if *d.Spec.Replicas != 1 {
		t.Errorf("replicas without HA = %d, want 1", *d.Spec.Replicas)
	}
	d, _ = container(t, renderChart(t, `reloader: {enableHA: true, deployment: {replicas: 3}}`))
	if *d.Spec.Replicas != 3 {
		t.Errorf("replicas with HA = %d, want 3", *d.Spec.Replicas)
	}
	if a := d.Spec.Template.Spec.Affinity; a == nil || a.PodAntiAffinity == nil {
		t.Errorf("HA renders no pod anti-affinity: %+v", a)
	}
	d, c := container(t, renderChart(t, `reloader: {sharding: {enabled: true, replicas: 4, shards: 16}, leaderElection: {leaseDuration: 20s}}`))
	if *d.Spec.Replicas != 4 || !slices.Contains(c.Args, "--shards=16") || !slices.Contains(c.Args, "--leader-election-lease-duration=20s") ||
		slices.Contains(c.Args, "--enable-ha=true") {
		t.Errorf("sharding renders %d replicas and args %v", *d.Spec.Replicas, c.Args)
	}
	if a := d.Spec.Template.Spec.Affinity; a == nil || a.PodAntiAffinity == nil {
		t.Errorf("sharding renders no pod anti-affinity: %+v", a)
	}
}

func TestImage(t *testing.T) {
	for _, tt := range []struct{ values, want string }{
		{``, "ghcr.io/reloader-operator/reloader:0.1.0"},
		{`image: {tag: v9}`, "ghcr.io/reloader-operator/reloader:v9"},
		// image.name is the path under global.imageRegistry, and nothing without one.
		{`image: {name: example.com/r, tag: v9}`, "ghcr.io/reloader-operator/reloader:v9"},
		{"global: {imageRegistry: mirror.local}\n" + `image: {name: team/reloader, tag: v9}`, "mirror.local/team/reloader:v9"},
		{"global: {imageRegistry: mirror.local}\n" + `image: {digest: "sha256:` + strings.Repeat("ab", 32) + `"}`, "mirror.local/reloader-operator/reloader:0.1.0"},
		{`reloader: {deployment: {image: {name: example.com/old, tag: v1.0.97}}}`, "example.com/old:v1.0.97"},
		{`global: {imageRegistry: mirror.local}`, "mirror.local/reloader-operator/reloader:0.1.0"},
		{`image: {digest: "sha256:` + strings.Repeat("ab", 32) + `"}`, "ghcr.io/reloader-operator/reloader@sha256:" + strings.Repeat("ab", 32)},
	} {
		if _, c := container(t, renderChart(t, tt.values)); c.Image != tt.want {
			t.Errorf("%s: image %s, want %s", tt.values, c.Image, tt.want)
		}
	}
}

// A values file written for upstream's chart, with the keys its defaults spell out (null
// maps, upstream's older image keys, keys reloader ignores), installs unchanged.
func TestUpstreamStyleValuesFileAccepted(t *testing.T) {
	objs := renderChart(t, `
global: {imagePullSecrets: [regcred]}
kubernetes: {host: https://kubernetes.default}
nameOverride: ""
fullnameOverride: ""
reloader:
  autoReloadAll: false
  isArgoRollouts: false
  isOpenshift: false
  ignoreSecrets: false
  ignoreConfigMaps: false
  reloadOnCreate: false
  syncAfterRestart: false
  reloadStrategy: default
  ignoreNamespaces: ""
  namespaceSelector: ""
  resourceLabelSelector: ""
  logFormat: ""
  watchGlobally: true
  enableHA: false
  readOnlyRootFileSystem: false
  legacy: {rbac: false}
  matchLabels: {}
  deployment:
    replicas: 1
    revisionHistoryLimit: 2
    nodeSelector:
    affinity: {}
    securityContext: {runAsNonRoot: true, runAsUser: 65534, seccompProfile: {type: RuntimeDefault}}
    containerSecurityContext: {}
    tolerations: []
    topologySpreadConstraints: []
    annotations: {}
    labels: {provider: stakater, group: com.stakater.platform}
    image: {name: ghcr.io/stakater/reloader, tag: v1.0.97, pullPolicy: IfNotPresent}
    env: {open: , secret: , field: , existing: }
    livenessProbe: {}
    readinessProbe: {}
    resources: {}
    pod: {annotations: {}}
    priorityClassName: ""
  service: {}
  rbac: {enabled: true, labels: {}}
  serviceAccount: {create: true, labels: {}, annotations: {}, name: }
  custom_annotations: {}
  serviceMonitor: {enabled: false, labels: {}, annotations: {}, honorLabels: true, metricRelabelings: [], relabelings: [], targetLabels: []}
  podMonitor: {enabled: false, labels: {}, annotations: {}, honorLabels: true, metricRelabelings: [], relabelings: [], podTargetLabels: []}
  podDisruptionBudget: {enabled: false}
  netpol: {enabled: false, from: [], to: []}
  verticalPodAutoscaler: {enabled: false, controlledResources: [], maxAllowed: {}, minAllowed: {}, updatePolicy: {updateMode: Auto}}
  volumeMounts: []
  volumes: []
  webhookUrl: ""
`)
	d, c := container(t, objs)
	parseOptions(t, objs)
	if c.Image != "ghcr.io/stakater/reloader:v1.0.97" {
		t.Errorf("image %s, want upstream's older image keys honoured", c.Image)
	}
	if ps := d.Spec.Template.Spec.ImagePullSecrets; len(ps) != 1 || ps[0].Name != "regcred" {
		t.Errorf("imagePullSecrets %v", ps)
	}
	if len(render.OfKind(objs, "ClusterRole")) != 1 {
		t.Error("no ClusterRole")
	}
}

func TestVerticalPodAutoscaler(t *testing.T) {
	objs := renderChart(t, `reloader: {verticalPodAutoscaler: {enabled: true, controlledResources: [memory], maxAllowed: {memory: 1Gi}}}`)
	vpa := render.Find(objs, "VerticalPodAutoscaler", fullname)
	if vpa == nil {
		t.Fatal("no VerticalPodAutoscaler")
	}
	if name, _, _ := unstructured.NestedString(vpa.Object, "spec", "targetRef", "name"); name != fullname {
		t.Errorf("VPA targets %q", name)
	}
}

// The chart sizes the container by default (a memory limit that GOMEMLIMIT follows, no CPU
// limit), and upstream's reloader.deployment.resources replaces what it gives.
func TestResources(t *testing.T) {
	for _, tt := range []struct{ values, requests, limits string }{
		{``, "cpu=10m memory=96Mi", "memory=512Mi"},
		{`reloader: {deployment: {resources: {limits: {memory: 1Gi, cpu: "2"}}}}`, "cpu=10m memory=96Mi", "cpu=2 memory=1Gi"},
		{`reloader: {deployment: {resources: {requests: {cpu: 50m, memory: null}, limits: {memory: null}}}}`, "cpu=50m", ""},
	} {
		_, c := container(t, renderChart(t, tt.values))
		if got := quantities(c.Resources.Requests); got != tt.requests {
			t.Errorf("%q: requests %q, want %q", tt.values, got, tt.requests)
		}
		if got := quantities(c.Resources.Limits); got != tt.limits {
			t.Errorf("%q: limits %q, want %q", tt.values, got, tt.limits)
		}
	}
}

func quantities(l corev1.ResourceList) string {
	var out []string
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := l[name]; ok {
			out = append(out, string(name)+"="+q.String())
		}
	}
	return strings.Join(out, " ")
}

// secureMetrics: /metrics asks for a token, so the probes move to their own plain port, and
// the ServiceMonitor scrapes over HTTPS with the pod's token.
func TestSecureMetricsProbesAndScrape(t *testing.T) {
	objs := renderChart(t, `reloader: {secureMetrics: true, service: {port: 9090}, serviceMonitor: {enabled: true}}`)
	_, c := container(t, objs)
	if !hasArg(c, "--metrics-secure=true") || !hasArg(c, "--health-addr=:8081") {
		t.Errorf("args %q", c.Args)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["http"] != 9090 || ports["probes"] != 8081 {
		t.Errorf("ports %v, want http 9090 and probes 8081", ports)
	}
	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Port.String() != "probes" || p.HTTPGet.Scheme == corev1.URISchemeHTTPS {
			t.Errorf("%s probe %+v, want plain HTTP on port probes", name, p)
		}
	}
	if conf := parseOptions(t, objs); !conf.MetricsSecure || conf.HealthAddr != ":8081" {
		t.Errorf("the binary reads secure %v, health %q", conf.MetricsSecure, conf.HealthAddr)
	}
	sm := render.Find(objs, "ServiceMonitor", fullname)
	if sm == nil {
		t.Fatal("no ServiceMonitor")
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	ep, _ := endpoints[0].(map[string]any)
	skip, _, _ := unstructured.NestedBool(ep, "tlsConfig", "insecureSkipVerify")
	if ep["scheme"] != "https" || !skip || ep["bearerTokenFile"] != "/var/run/secrets/kubernetes.io/serviceaccount/token" {
		t.Errorf("ServiceMonitor endpoint %v, want https with the pod's token", ep)
	}
}
