package rbac

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// parse builds options the way cmd/reloader does: flags, then the environment.
func parse(t *testing.T, env map[string]string, args ...string) options.Config {
	t.Helper()
	o := options.Default()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.BindFlags(fs)
	testutil.Must(t, fs.Parse(args))
	c, err := options.Load(o, func(k string) string { return env[k] })
	testutil.Must(t, err)
	return c
}

var ownEnv = map[string]string{"POD_NAMESPACE": "reloader", "POD_NAME": "reloader-0"}

func TestFor(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		platform Platform
		// watched, cluster and own list atoms that must (+) or must not (-) be granted.
		watched, cluster, own []string
		namespaces            []string
	}{
		{
			name: "default",
			env:  ownEnv,
			watched: []string{"+/configmaps:list", "+/secrets:watch", "-/configmaps:patch", "-/secrets:update",
				"+apps/deployments:patch", "+apps/statefulsets:patch", "+apps/daemonsets:patch", "+batch/cronjobs:patch",
				"+batch/jobs:create", "+batch/jobs:delete", "+batch/jobs:patch", "-apps/deployments:update",
				"+apps/controllerrevisions:create", "+apps/controllerrevisions:patch", "+apps/controllerrevisions:delete", "+apps/controllerrevisions:watch",
				"+/events:create", "+/events:patch", "-events.k8s.io/events:create",
				"-argoproj.io/rollouts:get", "-apps.openshift.io/deploymentconfigs:get",
				"-secrets-store.csi.x-k8s.io/secretproviderclasspodstatuses:get",
				"+reloader.dev/reloaderconfigs:watch", "+reloader.dev/reloaderconfigs/status:patch",
				"-reloader.dev/reloaderconfigs:patch", "-reloader.dev/reloaderconfigs/status:update",
				"-/pods:list", "-/pods/eviction:create", "-apps/replicasets:list"},
			cluster: []string{"-/namespaces:list"},
			own: []string{"+/configmaps[reloader-meta-info]:create", "+/configmaps[reloader-meta-info]:patch",
				"-coordination.k8s.io/leases:create", "-/secrets:create", "-/secrets:patch", "-/secrets:get",
				"+/secrets[reloader-hash-key]:create", "+/secrets[reloader-hash-key]:patch", "+/secrets[reloader-hash-key]:get",
				"-/secrets[reloader-hash-key]:update", "+/events:create"},
		},
		{
			name: "evict strategy: pods and ReplicaSets listed live, pods evicted, nothing watched or deleted",
			args: []string{"--enable-evict-strategy"},
			watched: []string{"+/pods:list", "+/pods/eviction:create", "+apps/replicasets:list",
				"-/pods:watch", "-/pods:get", "-/pods:delete", "-apps/replicasets:watch"},
		},
		{
			name:    "evict strategy with a webhook: nothing is written, nothing evicted",
			args:    []string{"--enable-evict-strategy", "--webhook-url=https://hooks.example.com/x"},
			watched: []string{"-/pods:list", "-/pods/eviction:create"},
		},
		{
			name:    "metrics secure: token and access reviews",
			args:    []string{"--metrics-secure"},
			cluster: []string{"+authentication.k8s.io/tokenreviews:create", "+authorization.k8s.io/subjectaccessreviews:create"},
		},
		{
			name:    "metrics secure, metrics off: no reviews",
			args:    []string{"--metrics-secure", "--metrics-addr=0"},
			cluster: []string{"-authentication.k8s.io/tokenreviews:create", "-authorization.k8s.io/subjectaccessreviews:create"},
		},
		{
			name: "secrets ignored: the key still signs Job replacement records",
			args: []string{"--resources-to-ignore=secrets"},
			env:  ownEnv,
			own:  []string{"-/secrets:create", "+/secrets[reloader-hash-key]:get", "+/secrets[reloader-hash-key]:create", "+/secrets[reloader-hash-key]:patch", "+/events:create"},
		},
		{
			name: "secrets and Jobs ignored: no install key",
			args: []string{"--resources-to-ignore=secrets", "--ignored-workload-types=jobs"},
			env:  ownEnv,
			own:  []string{"-/secrets:create", "-/secrets[reloader-hash-key]:get", "-/secrets[reloader-hash-key]:create", "-/events:create"},
		},
		{
			name:    "Jobs replaced: records read whole, CronJob owners' finalizers",
			env:     ownEnv,
			watched: []string{"+apps/controllerrevisions:get", "+batch/cronjobs/finalizers:update"},
		},
		{
			name:    "CronJobs run on reload, Jobs ignored: CronJob owners' finalizers",
			args:    []string{"--ignored-workload-types=jobs", "--run-cronjobs-on-reload"},
			env:     ownEnv,
			watched: []string{"+batch/jobs:create", "+batch/cronjobs/finalizers:update", "-apps/controllerrevisions:get"},
		},
		{
			name: "no own namespace: no meta-info",
			own:  []string{"-/configmaps[reloader-meta-info]:patch"},
		},
		{
			name:       "namespaced",
			env:        map[string]string{"KUBERNETES_NAMESPACE": "reloader", "POD_NAMESPACE": "reloader"},
			namespaces: []string{"reloader"},
		},
		{
			name:       "namespaces a,b",
			args:       []string{"--namespaces=a,b"},
			namespaces: []string{"a", "b"},
		},
		{
			name:    "sharded",
			args:    []string{"--shards=4"},
			env:     ownEnv,
			cluster: []string{"+/namespaces:list", "+/namespaces:watch"},
			own:     []string{"+coordination.k8s.io/leases:list", "+coordination.k8s.io/leases:watch", "+coordination.k8s.io/leases:delete", "+coordination.k8s.io/leases:update"},
		},
		{
			name: "HA",
			args: []string{"--enable-ha", "--leader-election-id=lock"},
			env:  ownEnv,
			own:  []string{"+coordination.k8s.io/leases:create", "+coordination.k8s.io/leases[lock]:get", "+coordination.k8s.io/leases[lock]:update", "-coordination.k8s.io/leases:get"},
		},
		{
			name:    "ignored kinds",
			args:    []string{"--resources-to-ignore=secrets", "--ignored-workload-types=jobs,cronjobs"},
			watched: []string{"-/secrets:get", "+/configmaps:get", "-batch/jobs:get", "-batch/jobs:create", "-batch/cronjobs:get"},
		},
		{
			name:    "CronJob runs without Job reloads",
			args:    []string{"--ignored-workload-types=jobs", "--run-cronjobs-on-reload"},
			watched: []string{"+batch/jobs:create", "-batch/jobs:get", "-batch/jobs:delete", "-apps/controllerrevisions:create"},
		},
		{
			name:    "Argo and CSI",
			args:    []string{"--is-Argo-Rollouts", "--enable-csi-integration"},
			watched: []string{"+argoproj.io/rollouts:patch", "+secrets-store.csi.x-k8s.io/secretproviderclasspodstatuses:watch", "-secrets-store.csi.x-k8s.io/secretproviderclasspodstatuses:patch"},
		},
		{
			name:    "Rollouts read Deployments even when those are ignored",
			args:    []string{"--is-Argo-Rollouts", "--ignored-workload-types=deployments"},
			watched: []string{"+apps/deployments:get", "+apps/deployments:patch"},
		},
		{
			name:     "OpenShift",
			platform: Platform{OpenShift: true},
			watched:  []string{"+apps.openshift.io/deploymentconfigs:patch"},
		},
		{
			name:     "OpenShift, --is-openshift=false",
			args:     []string{"--is-openshift=false"},
			platform: Platform{OpenShift: true},
			watched:  []string{"-apps.openshift.io/deploymentconfigs:get"},
		},
		{
			name:    "--is-openshift=true without the API: nothing watched, nothing granted",
			args:    []string{"--is-openshift=true"},
			watched: []string{"-apps.openshift.io/deploymentconfigs:get"},
		},
		{
			name:    "namespace selector",
			args:    []string{"--namespace-selector=env:prod"},
			cluster: []string{"+/namespaces:get", "+/namespaces:list", "+/namespaces:watch", "-/namespaces:patch"},
		},
		{
			name: "webhook only reads",
			args: []string{"--webhook-url=https://example.com/hook"},
			env:  ownEnv,
			watched: []string{"+apps/deployments:get", "-apps/deployments:patch", "-batch/jobs:create", "-/events:create",
				"+reloader.dev/reloaderconfigs:list", "-reloader.dev/reloaderconfigs/status:patch"},
			own: []string{"+/configmaps[reloader-meta-info]:patch"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := For(parse(t, tt.env, tt.args...), tt.platform)
			check(t, "watched", Grants(r.Watched), tt.watched)
			check(t, "cluster", Grants(r.Cluster), tt.cluster)
			check(t, "own", Grants(r.Own), tt.own)
			if !slices.Equal(r.Namespaces, tt.namespaces) {
				t.Errorf("namespaces = %v, want %v", r.Namespaces, tt.namespaces)
			}
		})
	}
}

func check(t *testing.T, where string, got, want []string) {
	t.Helper()
	for _, w := range want {
		atom, grant := w[1:], w[0] == '+'
		if slices.Contains(got, atom) != grant {
			t.Errorf("%s: granted(%s) = %v, want %v; grants: %v", where, atom, !grant, grant, got)
		}
	}
}

// Nothing reloader does needs to update or delete what it reads, except Jobs it replaces;
// it updates and deletes only its own ledger of first records, in its own namespace.
func TestNoWildcardsNoUpdates(t *testing.T) {
	opts := parse(t, ownEnv, "--enable-ha", "--is-Argo-Rollouts", "--enable-csi-integration", "--namespace-selector=a=b")
	r := For(opts, Platform{OpenShift: true})
	for _, a := range Grants(slices.Concat(r.Watched, r.Cluster, r.Own)) {
		if containsAny(a, "*", ":deletecollection", ":escalate", ":bind", ":impersonate") {
			t.Errorf("too broad: %s", a)
		}
		// cronjobs/finalizers: the blockOwnerDeletion of the Jobs reloader creates (rbac.go).
		// The ledger of first records: ConfigMaps reloader alone writes, in its own namespace.
		ledger := (a == "/configmaps:update" || a == "/configmaps:delete") && slices.Contains(Grants(r.Own), a) && !slices.Contains(Grants(slices.Concat(r.Watched, r.Cluster)), a)
		if containsAny(a, ":update") && !ledger && a != "coordination.k8s.io/leases["+opts.LeaderElectionID+"]:update" && a != "batch/cronjobs/finalizers:update" {
			t.Errorf("unexpected update: %s", a)
		}
		if containsAny(a, ":delete") && !ledger && a != "batch/jobs:delete" && a != "apps/controllerrevisions:delete" {
			t.Errorf("unexpected delete: %s", a)
		}
	}
}

func containsAny(s string, subs ...string) bool {
	return slices.ContainsFunc(subs, func(sub string) bool { return strings.Contains(s, sub) })
}

func TestGrantsNormalises(t *testing.T) {
	a := Grants([]rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments", "daemonsets"}, Verbs: []string{"list", "get"}}})
	b := Grants([]rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "get"}},
	})
	if !slices.Equal(a, b) {
		t.Errorf("%v != %v", a, b)
	}
}
