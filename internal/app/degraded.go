package app

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/reloader-operator/reloader/internal/clientindex"
	"github.com/reloader-operator/reloader/internal/lookup"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/rbac"
	"github.com/reloader-operator/reloader/internal/workload"
)

// degradedMode is how reloader reads the workload kinds its RBAC lets it list and get but not
// watch (upstream's ClusterRole grants no watch on workloads): without informers, listing a
// namespace's workloads of those kinds on each source change, as upstream does. A kind it
// may not even list is watched as before: unready until its RBAC comes (a RoleBinding applied
// after reloader started must not leave a kind out for the life of the process). The zero
// value (every kind watched) changes nothing.
type degradedMode struct {
	unwatched *lookup.Unwatched
	// kinds are the kinds read without watch, with the rule that would watch them.
	kinds []degradedKind
	// unlisted are the kinds reloader may not even list yet: watched, and waited for.
	unlisted []string
	// notes are the other refusals found at start-up, for the warning and the Event.
	notes []string
	// jobRights, when not empty, says what Job reloads lack (checkJobRights).
	jobRights string
	// split reads the unwatched kinds live; set once the manager exists (client).
	split *clientindex.Split
}

type degradedKind struct {
	name string
	rule rbacv1.PolicyRule
}

// checkWorkloadAccess asks the API server (SelfSubjectAccessReviews, which every
// authenticated user may create), for each kind read, whether reloader may list and watch it
// where it watches; failing that, whether it may list and get it. It also asks about the
// writes degraded installs lack, to name them in the warning.
func checkWorkloadAccess(ctx context.Context, cfg *rest.Config, conf options.Config, reconciled, read []workload.Kind) (*degradedMode, error) {
	d := &degradedMode{}
	unwatched := map[string]bool{}
	for _, kind := range read {
		gr := kind.Describe().Resource.GroupResource()
		watch, err := allowed(ctx, cfg, gr.Group, gr.Resource, conf.Namespaces, "list", "watch")
		if err != nil {
			return nil, err
		}
		if watch {
			continue
		}
		get, err := allowed(ctx, cfg, gr.Group, gr.Resource, conf.Namespaces, rbac.DegradedVerbs...)
		if err != nil {
			return nil, err
		}
		if !get {
			d.unlisted = append(d.unlisted, kind.Name())
			continue
		}
		unwatched[kind.Name()] = true
		d.kinds = append(d.kinds, degradedKind{name: kind.Name(), rule: rbac.WatchRule(gr.Group, gr.Resource)})
		if conf.WebhookURL == "" && slices.ContainsFunc(reconciled, func(k workload.Kind) bool { return k.Name() == kind.Name() }) {
			patch, err := allowed(ctx, cfg, gr.Group, gr.Resource, conf.Namespaces, "patch")
			if err != nil {
				return nil, err
			}
			if !patch {
				d.notes = append(d.notes, fmt.Sprintf("%ss need %s", kind.Name(),
					rbac.Format(rbacv1.PolicyRule{APIGroups: []string{gr.Group}, Resources: []string{gr.Resource}, Verbs: []string{"patch"}})))
			}
		}
	}
	records := true
	if replacesJobs(conf, reconciled) {
		var err error
		if records, d.jobRights, err = checkJobRights(ctx, cfg, conf); err != nil {
			return nil, err
		}
	}
	if len(unwatched) == 0 {
		// The full mode: what it lacks is waited for (the RBAC may come just after reloader),
		// but for the records of Job reloads, whose watch would keep the cache from syncing.
		if !records {
			d.unwatched = &lookup.Unwatched{Records: true}
		}
		return d, nil
	}
	d.unwatched = &lookup.Unwatched{Kinds: unwatched, Records: !records, Namespaces: conf.Namespaces, Fields: conf.NamespaceFilter}
	if conf.ReloaderNamespace != "" {
		// The meta-info ConfigMap is written with a server-side apply (a patch), else, as
		// under upstream's metadata Role, with get and create or update.
		ns := []string{conf.ReloaderNamespace}
		patch, err1 := allowed(ctx, cfg, "", "configmaps", ns, "patch")
		write, err2 := allowed(ctx, cfg, "", "configmaps", ns, "get", "create", "update")
		if err1 == nil && err2 == nil && !patch && !write {
			d.notes = append(d.notes, "the meta-info ConfigMap can't be written (neither patch nor get, create and update on configmaps in "+conf.ReloaderNamespace+")")
		}
	}
	return d, nil
}

// watched returns the kinds of kinds that have informers.
func (d *degradedMode) watched(kinds []workload.Kind) []workload.Kind {
	return slices.DeleteFunc(slices.Clone(kinds), func(k workload.Kind) bool { return d.unwatched.Has(k.Name()) })
}

// client returns the client the reconcilers read through: the manager's, whose reads of
// unwatched kinds go to the API server instead of the cache.
func (d *degradedMode) client(mgr manager.Manager, kinds []workload.Kind) (client.Client, error) {
	if len(d.kinds) == 0 {
		return mgr.GetClient(), nil
	}
	if d.split != nil {
		return d.split, nil
	}
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("client for the kinds read without watch: %w", err)
	}
	var live []client.Object
	for _, k := range kinds {
		if d.unwatched.Has(k.Name()) {
			live = append(live, k.NewObject())
		}
	}
	if d.split, err = clientindex.NewSplit(mgr.GetClient(), direct, live...); err != nil {
		return nil, err
	}
	d.split.Live.ReuseLists(listReuse)
	return d.split, nil
}

// listReuse is how long one list of a namespace's workloads of a kind serves the lookups of
// source changes there: the several lookups of one change, and the changes of a burst. A
// workload created within it before a change of its source may take that change as its
// first sighting (recorded, not reloaded).
const listReuse = 250 * time.Millisecond

// message says what runs degraded, what it costs, and what to grant for the full mode.
func (d *degradedMode) message() string {
	if len(d.kinds) == 0 {
		return ""
	}
	var names, rules []string
	// One rule per API group: short enough for an Event's note.
	var merged []rbacv1.PolicyRule
	for _, k := range d.kinds {
		names = append(names, k.name+"s")
		i := slices.IndexFunc(merged, func(r rbacv1.PolicyRule) bool { return slices.Equal(r.APIGroups, k.rule.APIGroups) })
		if i < 0 {
			merged = append(merged, k.rule)
			continue
		}
		merged[i].Resources = append(slices.Clone(merged[i].Resources), k.rule.Resources...)
	}
	for _, r := range merged {
		rules = append(rules, "{"+rbac.Format(r)+"}")
	}
	msg := fmt.Sprintf("DEGRADED MODE: RBAC allows list and get but no watch on %s: "+
		"each ConfigMap or Secret change lists the namespace's workloads of those kinds (as upstream does); "+
		"a workload's own edits are seen at its sources' next change. For the full mode, grant: %s",
		strings.Join(names, ", "), strings.Join(rules, ", "))
	if len(d.notes) > 0 {
		msg += ". Also: " + strings.Join(d.notes, "; ")
	}
	return msg
}

// keyWait is how long a refused read of the install key is retried before Secrets are hashed
// without it (hashkey.Options.ForbiddenFor): 0, the default, normally; at once in degraded
// mode, whose RBAC (upstream's, there before reloader started) never grants the key.
func (d *degradedMode) keyWait() time.Duration {
	if len(d.kinds) > 0 {
		return time.Nanosecond
	}
	return 0
}
