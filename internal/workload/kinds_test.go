package workload

import (
	"slices"
	"strings"
	"testing"
)

// TestKnownKinds: each kind's description, as the flags, RBAC and CLI read it.
func TestKnownKinds(t *testing.T) {
	tests := []struct {
		kind         string
		gvr          string
		names        string
		gate         Gate
		capabilities string
		verbs        string
	}{
		{"Deployment", "apps/v1, Resource=deployments", "deployment deployments deploy", Always, "pause evict progress", "get list watch patch"},
		{"StatefulSet", "apps/v1, Resource=statefulsets", "statefulset statefulsets sts", Always, "evict progress", "get list watch patch"},
		{"DaemonSet", "apps/v1, Resource=daemonsets", "daemonset daemonsets ds", Always, "evict progress", "get list watch patch"},
		{"CronJob", "batch/v1, Resource=cronjobs", "cronjob cronjobs cj", Always, "run-now", "get list watch patch"},
		{"Job", "batch/v1, Resource=jobs", "job jobs", Always, "recreate", "get list watch patch create delete"},
		{"Rollout", "argoproj.io/v1alpha1, Resource=rollouts", "rollout rollouts ro", ArgoRollouts, "restart reference progress", "get list watch patch"},
		{"DeploymentConfig", "apps.openshift.io/v1, Resource=deploymentconfigs", "deploymentconfig deploymentconfigs dc", OpenShift, "progress", "get list watch patch"},
	}
	known := Known()
	if len(known) != len(tests) {
		t.Fatalf("%d kinds known, want %d", len(known), len(tests))
	}
	for i, tt := range tests {
		k := known[i]
		d := k.Describe()
		if k.Name() != tt.kind || d.Resource.String() != tt.gvr || strings.Join(Names(k), " ") != tt.names || d.Gate != tt.gate ||
			strings.Join(Capabilities(k), " ") != tt.capabilities || strings.Join(Verbs(k, true), " ") != tt.verbs {
			t.Errorf("kind %d: %s %s names %v gate %d can %v verbs %v; want %+v", i, k.Name(), d.Resource, Names(k), d.Gate, Capabilities(k), Verbs(k, true), tt)
		}
		if got := GVK(k); got.Kind != tt.kind || got.GroupVersion() != d.Resource.GroupVersion() {
			t.Errorf("%s: GVK %v", k.Name(), got)
		}
		if v := Verbs(k, false); !slices.Equal(v, []string{"get", "list", "watch"}) {
			t.Errorf("%s: verbs without writes %v", k.Name(), v)
		}
	}
	if got := strings.Join(known.Plurals(), ", "); got != "deployments, daemonsets, statefulsets, cronjobs, jobs, rollouts, deploymentconfigs" {
		t.Errorf("Plurals = %s", got)
	}
	if got := Builtin(); len(got) != 5 || got[0].Name() != "Deployment" || got[4].Name() != "Job" {
		t.Errorf("Builtin = %v", got)
	}
}

func TestCatalogLookups(t *testing.T) {
	known := Known()
	seen := map[string]string{}
	for _, k := range known {
		for _, n := range Names(k) {
			if other, dup := seen[n]; dup {
				t.Errorf("name %q of both %s and %s", n, other, k.Name())
			}
			seen[n] = k.Name()
			if got, ok := known.Lookup(strings.ToUpper(n)); !ok || got.Name() != k.Name() {
				t.Errorf("Lookup(%q) = %v, %v", n, got, ok)
			}
		}
	}
	if _, ok := known.Lookup("pods"); ok {
		t.Error("Lookup(pods) found a kind")
	}
	if run, ok := known.RunsAs(CronJob()); !ok || run.Name() != "Job" {
		t.Errorf("RunsAs(CronJob) = %v, %v", run, ok)
	}
	if _, ok := known.RunsAs(Deployment()); ok {
		t.Error("a Deployment runs something")
	}
	read := known.Read([]Kind{Rollout()})
	if len(read) != 2 || read[1].Name() != "Deployment" {
		t.Errorf("Read(Rollout) = %v, want Rollout and the Deployment its workloadRef names", read)
	}
	if read := known.Read([]Kind{Deployment(), Rollout()}); len(read) != 2 {
		t.Errorf("Read(Deployment, Rollout) = %v", read)
	}
}
