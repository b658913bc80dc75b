// Package rbac declares, once, the Kubernetes permissions reloader needs for a set of options.
// The Helm chart's ClusterRole and Roles are tested against it, so the chart can neither grant
// more than the controller uses nor forget what a flag makes it use.
package rbac

import (
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/hashkey"
	"github.com/reloader-operator/reloader/internal/metainfo"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/workload"
)

// Platform says what the options alone can't: which optional APIs the cluster serves that
// reloader watches without a flag.
type Platform struct {
	// OpenShift: the apps.openshift.io DeploymentConfig API is served. Reloader finds it by
	// discovery and watches DeploymentConfigs; the chart's reloader.isOpenshift.
	OpenShift bool
}

// Rules are the permissions of one reloader install, by where they must be granted.
type Rules struct {
	// Watched are granted where reloader watches: in a ClusterRole for a cluster-wide
	// install, or in a Role in each namespace of Namespaces.
	Watched []rbacv1.PolicyRule
	// Namespaces are the watched namespaces; empty means all (a cluster-wide install).
	Namespaces []string
	// Cluster are rules on cluster-scoped resources, which only a ClusterRole can grant.
	Cluster []rbacv1.PolicyRule
	// Own are granted only in reloader's own namespace (a Role): the HA Lease, the
	// meta-info ConfigMap, the Secret hash key and the Event of its fallback.
	Own []rbacv1.PolicyRule
}

var read = []string{"get", "list", "watch"}

// For returns the permissions reloader needs when run with opts on platform p. The workload
// kinds are those internal/app watches (options.Config.WorkloadKinds, from each kind's
// description in internal/workload), with the verbs each needs (workload.Verbs).
func For(opts options.Config, p Platform) Rules {
	// With --webhook-url reloader only reads: it POSTs instead of writing workloads or Events.
	writes := opts.WebhookURL == ""
	r := Rules{Namespaces: append([]string(nil), opts.Namespaces...)}

	ignored := opts.IgnoredSources
	if !ignored[source.ConfigMap] {
		r.Watched = append(r.Watched, rule("", "configmaps", read...))
	}
	if !ignored[source.Secret] {
		r.Watched = append(r.Watched, rule("", "secrets", read...))
	}
	if opts.EnableCSIIntegration {
		r.Watched = append(r.Watched, rule("secrets-store.csi.x-k8s.io", "secretproviderclasspodstatuses", read...))
	}

	workloads, jobsReloaded := workloadRules(opts, p, writes)
	r.Watched = append(r.Watched, workloads...)
	// ReloaderConfigs add rules to the annotations (the chart ships their CRD; reloader
	// watches them when it is served); their status is written with a merge patch, by the
	// leader only, as the workloads are.
	r.Watched = append(r.Watched, rule(v1alpha1.GroupVersion.Group, "reloaderconfigs", read...))
	if writes {
		r.Watched = append(r.Watched, rule(v1alpha1.GroupVersion.Group, "reloaderconfigs/status", "patch"))
	}
	if writes && opts.EnableEvictStrategy {
		// The evict restart strategy reads a restarting workload's pods (and a Deployment's
		// ReplicaSets, which own them) live, without watch, and evicts them one at a time.
		r.Watched = append(r.Watched, rule("", "pods", "list"), rule("", "pods/eviction", "create"), rule("apps", "replicasets", "list"))
	}
	if writes {
		// Events are written through the core API (internal/coreevents), as upstream's, in
		// the workload's namespace; a repeated Event becomes a patch of its series.
		r.Watched = append(r.Watched, rule("", "events", "create", "patch"))
	}

	if opts.NamespaceLabels != nil || opts.Shards > 1 {
		// The selector is matched against the namespace's labels on every reconcile; with
		// --shards, the namespaces owned are named to the API server.
		r.Cluster = append(r.Cluster, rule("", "namespaces", read...))
	}

	if opts.MetricsSecure && opts.MetricsAddr != "0" ||
		opts.PlanWebhookAddr != "" && opts.PlanWebhookClientAuth == options.PlanWebhookClientToken {
		// --metrics-secure asks the API server who a scraper is and whether it may read
		// /metrics (internal/metricsauth); the plan webhook's token mode, who its caller is
		// and whether it may post its path.
		r.Cluster = append(r.Cluster, rule("authentication.k8s.io", "tokenreviews", "create"),
			rule("authorization.k8s.io", "subjectaccessreviews", "create"))
	}

	if opts.EnableHA {
		// The leader election lock: created once (a create has no name to restrict it to),
		// then read and renewed by name.
		r.Own = append(r.Own,
			rule("coordination.k8s.io", "leases", "create"),
			named(rule("coordination.k8s.io", "leases", "get", "update"), opts.LeaderElectionID))
	}
	if opts.Shards > 1 {
		// --shards: each replica's member Lease and the Lease of each shard, named after
		// replicas and shards that come and go; members are watched, dead ones deleted.
		r.Own = append(r.Own, rule("coordination.k8s.io", "leases", "get", "list", "watch", "create", "update", "delete"))
	}
	if (!ignored[source.Secret] || jobsReloaded) && opts.ReloaderNamespace != "" {
		// The install key, of Secret hashes and of Job replacement records, by name only:
		// read by every replica, created by the first with a server-side apply (a patch, and
		// a create when the Secret is new, both authorised by name; a POST would need create
		// on every Secret). Without an own namespace reloader keeps it in the first watched
		// namespace or "default" (internal/hashkey): a run outside a cluster, with its user's
		// own rights. Without access to the key reloader says so with a Warning Event here (a
		// create has no name to restrict it to).
		r.Own = append(r.Own, named(rule("", "secrets", "get", "create", "patch"), hashkey.SecretName),
			rule("", "events", "create"))
	}
	if writes && opts.FirstRecordLedger && opts.ReloaderNamespace != "" {
		// The ledger of first records (internal/ledger): a ConfigMap per workload namespace,
		// listed and watched by label, created, updated and (once empty) deleted by reloader
		// alone (names come and go with namespaces, so they cannot be named here).
		r.Own = append(r.Own, rule("", "configmaps", "get", "list", "watch", "create", "update", "delete"))
	}
	if opts.ReloaderNamespace != "" {
		// Server-side apply of one ConfigMap: a patch, and a create the first time, both
		// authorised by name.
		r.Own = append(r.Own, named(rule("", "configmaps", "create", "patch"), metainfo.Name))
	}
	return r
}

// MetricsReader is what a scraper needs with --metrics-secure: the chart's ClusterRole
// <fullname>-metrics-reader, bound by users to their Prometheus.
func MetricsReader() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}
}

func rule(group, resource string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: verbs}
}

func named(r rbacv1.PolicyRule, names ...string) rbacv1.PolicyRule {
	r.ResourceNames = names
	return r
}

// workloadRules are the rules on workloads: each kind read (options.Config.WorkloadKinds,
// which holds the kinds of the platform's optional APIs that opts leaves in), with the verbs
// it needs, and what replacing and starting workloads takes besides. replaced reports
// whether some kind is replaced on reload (Jobs), which signs its records with the install
// key.
func workloadRules(opts options.Config, p Platform, writes bool) (rules []rbacv1.PolicyRule, replaced bool) {
	kinds := opts.KnownKinds()
	// Of the optional APIs, reloader watches Argo Rollouts on a flag alone; DeploymentConfigs
	// when discovery finds them (the platform).
	served := func(k workload.Kind) bool { return k.Describe().Gate != workload.OpenShift || p.OpenShift }
	reconciled, readKinds := opts.WorkloadKinds(served)
	creates := map[string]bool{} // the kinds whose objects reloader creates
	for _, k := range readKinds {
		verbs := workload.Verbs(k, writes)
		if slices.Contains(verbs, "create") {
			creates[k.Name()] = true
		}
		if _, ok := k.(workload.Recreated); ok && writes {
			replaced = true
		}
		res := k.Describe().Resource
		rules = append(rules, rule(res.Group, res.Resource, verbs...))
	}
	if replaced {
		// A Job's replacement is written down first, as a ControllerRevision beside it, and
		// watched, so that one cut short by a crash is finished by the next leader; one is
		// read whole (get) from the API server only when it is acted on, since the cache
		// keeps no record's data. It is signed once created (patch), over the UID the API
		// server gave it.
		rules = append(rules, rule("apps", "controllerrevisions", "get", "list", "watch", "create", "patch", "delete"))
	}
	for _, k := range reconciled {
		run, ok := kinds.RunsAs(k)
		if !ok || !writes || !opts.RunCronJobsOnReload || creates[run.Name()] {
			continue
		}
		// Starting a Job from a reloaded CronJob needs create only; Jobs are not watched.
		creates[run.Name()] = true
		res := run.Describe().Resource
		rules = append(rules, rule(res.Group, res.Resource, "create"))
	}
	for _, owner := range kinds {
		if run, ok := kinds.RunsAs(owner); ok && creates[run.Name()] {
			// The Jobs reloader creates keep their CronJob's ownerReference with
			// blockOwnerDeletion, which the OwnerReferencesPermissionEnforcement admission
			// plugin (OpenShift's default) allows only to who may update the owner's
			// finalizers.
			res := owner.Describe().Resource
			rules = append(rules, rule(res.Group, res.Resource+"/finalizers", "update"))
		}
	}
	return rules, replaced
}
