package configstatus

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/lookup"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/workload"
)

// resolution is what a config's rules choose now: workloads, sources, and what is wrong.
type resolution struct {
	targets map[workloadKey]resolvedTarget
	sources map[source.ID]resolvedSource
	// chosen are the sources the rules choose, present or not: the reloads they cause are the
	// config's.
	chosen map[source.ID]bool
	issues []reloaderconfig.Issue
	// seen dedups issues.
	seen map[string]bool
	// all caches each source kind's objects of the namespace for the selector rules.
	all map[source.Kind]map[string]sourcecache.Snapshot
}

type resolvedTarget struct {
	kind workload.Kind
	obj  client.Object
}

type resolvedSource struct {
	kind source.Kind
	hash string
	keys []string
}

func (res *resolution) issue(reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if res.seen[msg] {
		return
	}
	res.seen[msg] = true
	res.issues = append(res.issues, reloaderconfig.Issue{Reason: reason, Message: msg})
}

// resolve reads what config c of namespace ns chooses, from the cache.
func (r *Reconciler) resolve(ctx context.Context, ns string, c *reloaderconfig.Compiled) (*resolution, error) {
	res := &resolution{targets: map[workloadKey]resolvedTarget{}, sources: map[source.ID]resolvedSource{},
		chosen: map[source.ID]bool{}, seen: map[string]bool{}, all: map[source.Kind]map[string]sourcecache.Snapshot{}}
	for _, err := range c.Errs {
		res.issue(v1alpha1.ReasonInvalidSpec, "%v", err)
	}
	if err := r.resolveTargets(ctx, ns, c, res); err != nil {
		return nil, err
	}
	for i := range c.Rules {
		if err := r.resolveSources(ctx, ns, &c.Rules[i], res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func (r *Reconciler) resolveTargets(ctx context.Context, ns string, c *reloaderconfig.Compiled, res *resolution) error {
	read := map[string]bool{}
	for _, t := range c.Targets {
		// A target repeated is read once (the same workloads, the same issues).
		if read[t.Kind+"\x00"+t.Key()] {
			continue
		}
		read[t.Kind+"\x00"+t.Key()] = true
		kind := r.kind(t.Kind)
		if kind == nil {
			res.issue(v1alpha1.ReasonKindNotWatched, "reloader does not reconcile %ss: the kind is ignored (--ignored-workload-types, --is-Argo-Rollouts) or its API is not served", t.Kind)
			continue
		}
		found, err := r.Lookup.TargetsOf(ctx, kind, ns, t, func(obj client.Object) {
			res.targets[workloadKey{kind.Name(), client.ObjectKeyFromObject(obj)}] = resolvedTarget{kind: kind, obj: obj}
		})
		switch {
		case err != nil:
			return err
		case found == 0 && t.Name != "":
			res.issue(v1alpha1.ReasonTargetMissing, "%s %s does not exist", kind.Name(), t.Name)
		case found == 0:
			res.issue(v1alpha1.ReasonSelectorNoMatch, "no %s matches the selector %q", kind.Name(), t.Selector.String())
		}
	}
	return nil
}

func (r *Reconciler) resolveSources(ctx context.Context, ns string, rule *reload.ConfigRule, res *resolution) error {
	st, ok := r.Lookup.SourceType(rule.Kind)
	if !ok {
		res.issue(v1alpha1.ReasonKindNotWatched, "reloader ignores %ss (--resources-to-ignore)", rule.Kind.Title())
		return nil
	}
	add := func(name string, s sourcecache.Snapshot, exists bool, missing string) {
		id := source.ID{Kind: rule.Kind, Name: name}
		res.chosen[id] = true
		if !exists {
			res.issue(v1alpha1.ReasonSourceMissing, "%s", missing)
			return
		}
		rs := res.sources[id]
		rs.kind, rs.keys = rule.Kind, union(rs.keys, rule.Keys)
		// The hash reloader compares for these targets: of the listed keys when there are.
		rs.hash = st.HashOf(s.Object(), rs.keys, len(rs.keys) > 0)
		res.sources[id] = rs
		// A source over the cap keeps no key names (hash.MaxKeyDigests): none can be checked.
		if _, over := st.OverCap(s.Object()); len(rule.Keys) > 0 && !over {
			have := st.KeyDigestsOf(s.Object())
			for _, k := range rule.Keys {
				if _, ok := have[k]; !ok {
					res.issue(v1alpha1.ReasonKeyMissing, "%s %s has no key %s", rule.Kind.Title(), name, k)
				}
			}
		}
	}
	switch {
	case rule.Name != "":
		s, exists, err := r.Lookup.Source(ctx, st, ns, rule.Name)
		if err != nil {
			return err
		}
		add(rule.Name, s, exists, fmt.Sprintf("%s %s does not exist", rule.Kind.Title(), rule.Name))
	case rule.Selector != nil:
		all, err := res.allOf(ctx, r.Lookup, st, ns)
		if err != nil {
			return err
		}
		found := 0
		for _, name := range slices.Sorted(maps.Keys(all)) {
			if s := all[name]; rule.Selector.Matches(labels.Set(s.Labels())) {
				found++
				add(name, s, true, "")
			}
		}
		if found == 0 {
			res.issue(v1alpha1.ReasonSelectorNoMatch, "no %s matches the selector %q", rule.Kind.Title(), rule.Selector.String())
		}
	case rule.Auto:
		for _, key := range sortedTargets(res.targets) {
			t := res.targets[key]
			for _, ref := range source.Refs(&t.kind.PodTemplate(t.obj).Spec) {
				if ref.Kind != rule.Kind {
					continue
				}
				s, exists, err := r.Lookup.Source(ctx, st, ns, ref.Name)
				if err != nil {
					return err
				}
				add(ref.Name, s, exists, fmt.Sprintf("%s %s, used by %s %s, does not exist", rule.Kind.Title(), ref.Name, t.kind.Name(), t.obj.GetName()))
			}
		}
	}
	return nil
}

// allOf reads every source of st's kind in ns once per reconcile.
func (res *resolution) allOf(ctx context.Context, l lookup.Lookup, st sourcecache.SourceType, ns string) (map[string]sourcecache.Snapshot, error) {
	if all, ok := res.all[st.Kind]; ok {
		return all, nil
	}
	all, err := l.SourcesIn(ctx, st, ns)
	if err != nil {
		return nil, err
	}
	res.all[st.Kind] = all
	return all, nil
}

// conflicts adds the settings another config targeting the same workloads sets differently.
func (r *Reconciler) conflicts(c *reloaderconfig.Compiled, peers []*reloaderconfig.Compiled, res *resolution) {
	if len(peers) < 2 {
		return
	}
	for _, key := range sortedTargets(res.targets) {
		t := res.targets[key]
		var targeting []*reloaderconfig.Compiled
		for _, p := range peers {
			if p.TargetsWorkload(t.kind.Name(), t.obj) {
				targeting = append(targeting, p)
			}
		}
		for _, conflict := range reloaderconfig.Merge(targeting).Conflicts {
			if conflict.Winner == c.Name || conflict.Loser == c.Name {
				res.issue(v1alpha1.ReasonConflictingRules, "%s (on %s %s)", conflict, t.kind.Name(), t.obj.GetName())
			}
		}
	}
}

// pausedUntil is when a paused-for-a-period Deployment resumes; nil when it is not paused so.
// The workload's own pause-period annotation wins over the config's, as in the reconciler.
func (r *Reconciler) pausedUntil(t resolvedTarget, c *reloaderconfig.Compiled) *metav1.Time {
	p, ok := t.kind.(workload.Pausable)
	if !ok || !p.Paused(t.obj) {
		return nil
	}
	ann := t.obj.GetAnnotations()
	pausedAt, ok := ann[r.Keys.PausedAt]
	if !ok {
		return nil
	}
	period, hasPeriod := ann[r.Keys.PausePeriod]
	until, ok := reload.PauseEnds(pausedAt, period, hasPeriod, c.Overrides.PausePeriod)
	if !ok {
		return nil
	}
	// Whole seconds, as the status is stored: a sub-second pause end would never compare
	// equal to the stored one and every reconcile would write.
	mt := metav1.NewTime(until).Rfc3339Copy()
	return &mt
}

func sortedTargets(m map[workloadKey]resolvedTarget) []workloadKey {
	keys := make([]workloadKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b workloadKey) int {
		return strings.Compare(a.kind+"/"+a.Name, b.kind+"/"+b.Name)
	})
	return keys
}

func union(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}
