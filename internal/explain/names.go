package explain

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/workload"
)

// workloadNames are the names kubectl accepts for each kind: singular, plural, short.
var workloadNames = map[string][]string{
	"Deployment":       {"deployment", "deployments", "deploy"},
	"StatefulSet":      {"statefulset", "statefulsets", "sts"},
	"DaemonSet":        {"daemonset", "daemonsets", "ds"},
	"CronJob":          {"cronjob", "cronjobs", "cj"},
	"Job":              {"job", "jobs"},
	"Rollout":          {"rollout", "rollouts", "ro"},
	"DeploymentConfig": {"deploymentconfig", "deploymentconfigs", "dc"},
}

// sourceNames are the names accepted for each kind of source.
var sourceNames = map[source.Kind][]string{
	source.ConfigMap: {"configmap", "configmaps", "cm"},
	source.Secret:    {"secret", "secrets"},
}

// allKinds are the workload kinds reloader knows, whether or not this install reloads them.
func allKinds() []workload.Kind {
	return append(workload.Builtin(), workload.Rollout(), workload.DeploymentConfig())
}

// Target is what the command was asked about: a workload, or a source.
type Target struct {
	Workload workload.Kind
	Source   source.Kind
	Name     string
}

// ParseTarget reads "kind/name" as kubectl does: any case, singular, plural or short name,
// with an optional API group after a dot ("deployments.apps/web").
func ParseTarget(arg string) (Target, error) {
	kind, name, ok := strings.Cut(arg, "/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return Target{}, fmt.Errorf("%q: want <kind>/<name>, such as deployment/web or configmap/app-config", arg)
	}
	if problems := validation.IsDNS1123Subdomain(name); len(problems) > 0 {
		return Target{}, fmt.Errorf("%q: %q is not an object name: %s", arg, name, strings.Join(problems, "; "))
	}
	kind, _, _ = strings.Cut(strings.ToLower(kind), ".")
	for _, k := range allKinds() {
		for _, n := range workloadNames[k.Name()] {
			if n == kind {
				return Target{Workload: k, Name: name}, nil
			}
		}
	}
	for k, names := range sourceNames {
		for _, n := range names {
			if n == kind {
				return Target{Source: k, Name: name}, nil
			}
		}
	}
	return Target{}, fmt.Errorf("%q: unknown kind %q; want one of deployment, statefulset, daemonset, cronjob, job, rollout, deploymentconfig, configmap, secret", arg, kind)
}
