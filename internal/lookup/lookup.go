package lookup

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/workload"
)

// Lookup answers what the controllers ask of the cache, by value: the sources of a
// namespace, the index of the workloads by source, which ReloaderConfigs target a workload,
// and the questions built on them: which workloads a source concerns (Affected), whether a
// namespace is selected (NamespaceSelected), what concerns a workload (Concerned). The
// workload reconcilers, the notifier, the ReloaderConfig status and `reloader explain` all ask
// through it, so they find the same answers. It keeps no state: a copy is as good as the
// original.
type Lookup struct {
	// Client reads the cache (or, for explain, the API server through the same indexes).
	Client client.Reader
	// Sources are the source types read.
	Sources []sourcecache.SourceType
	Policy  reload.Policy
	// Configs compiles the ReloaderConfigs; nil when their API is not read, and only the
	// annotations apply.
	Configs *reloaderconfig.Cache
	// Namespaces selects, by label, the namespaces whose workloads reload; nil selects all.
	Namespaces labels.Selector
	// Weighed, when set, counts each ReloaderConfig target weighed against a workload: what
	// a source event's lookup costs, for tests.
	Weighed *atomic.Int64
}

// NamespaceSelected applies the namespace selector to the namespace as it is now.
func (l Lookup) NamespaceSelected(ctx context.Context, name string) (bool, error) {
	if l.Namespaces == nil {
		return true, nil
	}
	ns := &corev1.Namespace{}
	if err := l.Client.Get(ctx, types.NamespacedName{Name: name}, ns); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return l.Namespaces.Matches(labels.Set(ns.Labels)), nil
}

// SourceName names the source a watched object of type st stands for; empty for none.
func (l Lookup) SourceName(st sourcecache.SourceType, o client.Object) string {
	return st.SourceName(o)
}

// SourceType returns how the source kind is read; ok is false for a kind not read.
func (l Lookup) SourceType(kind source.Kind) (sourcecache.SourceType, bool) {
	for _, st := range l.Sources {
		if st.Kind == kind {
			return st, true
		}
	}
	return sourcecache.SourceType{}, false
}

// Source reads one source of type st; exists is false when it does not exist.
func (l Lookup) Source(ctx context.Context, st sourcecache.SourceType, ns, name string) (s sourcecache.Snapshot, exists bool, err error) {
	return st.Get(ctx, l.Client, ns, name)
}

// SourcesIn reads every source of type st in a namespace, by name.
func (l Lookup) SourcesIn(ctx context.Context, st sourcecache.SourceType, ns string) (map[string]sourcecache.Snapshot, error) {
	return st.All(ctx, l.Client, ns)
}

// Affected returns the workloads of kind in ns that a change of source id concerns, found as
// the controller finds them for a source event; annotations and labels are the source's.
func (l Lookup) Affected(ctx context.Context, kind workload.Kind, ns string, id source.ID, annotations, labels map[string]string) []client.Object {
	var out []client.Object
	_, _ = l.FindAffected(ctx, kind, ns, id, annotations, labels, func(w client.Object) { out = append(out, w) })
	return out
}

// FindAffected calls fn once for each workload of kind in ns that source id concerns; annotations
// and labels are the source's own. It returns how many workloads the lookups found: through
// the index, and the targets of the ReloaderConfigs with a rule for the source; and the first
// lookup that failed (each failure is logged), after which fn may have missed workloads. From
// the cache a lookup never fails; a live one (degraded mode) can.
//
// Its cost is bounded by what the source can concern, not by the namespace's configs times
// their targets times its workloads: an ignored source stops before any lookup; the configs'
// targets are weighed once per distinct target and workload (targetPlan); each workload (and
// template) is decided once; and the targets of the configs with a rule for the source are
// listed once per distinct target, not once per config.
func (l Lookup) FindAffected(ctx context.Context, kind workload.Kind, ns string, id source.ID, annotations, labels map[string]string, fn func(client.Object)) (scanned int, failed error) {
	return l.FindAffectedOf(ctx, kind, ns, id, annotations, labels, nil, fn)
}

// FindAffectedOf is FindAffected among the workloads keep accepts (nil: all), asked before
// the rules of each are weighed: the baselines look among the workloads without record, and
// a source used by hundreds of recorded ones costs them no parse of their rules.
func (l Lookup) FindAffectedOf(ctx context.Context, kind workload.Kind, ns string, id source.ID, annotations, labels map[string]string, keep func(client.Object) bool, fn func(client.Object)) (scanned int, failed error) {
	if l.Policy.Ignores(id.Kind, annotations) {
		// Concerns would refuse it for every workload: nothing to look up.
		return 0, nil
	}
	// Listed once here, not once per workload found.
	configs, err := l.NamespaceConfigs(ctx, ns)
	if err != nil {
		log.FromContext(ctx).Error(err, "reading ReloaderConfigs; their rules are left out of this lookup")
	}
	plan := l.plan(kind, configs)
	c := reload.Candidate{ID: id, Annotations: annotations, Labels: labels}
	// A Rollout may be found twice, with its own template and with its Deployment's (via
	// names the Deployment); a workload is found again through each config that targets it.
	visited, decided, found := map[string]bool{}, map[string]bool{}, map[string]bool{}
	add := func(w client.Object, tpl *corev1.PodTemplateSpec, via string) {
		name := w.GetName()
		if !visited[name] {
			visited[name] = true
			scanned++
		}
		if found[name] || decided[name+"/"+via] {
			return
		}
		decided[name+"/"+via] = true
		if keep != nil && !keep(w) {
			return
		}
		if l.concerns(ctx, w, tpl, plan, c) {
			found[name] = true
			fn(w)
		}
	}
	note := func(err error) {
		if failed == nil {
			failed = err
		}
	}
	for _, value := range []string{id.String(), anyOf(id.Kind)} {
		note(l.byIndex(ctx, kind.Name(), kind.NewList(), ns, value, func(w client.Object) {
			add(w, kind.PodTemplate(w), "")
		}))
	}
	if _, ok := kind.(workload.Referencing); ok {
		// Rollouts that run a Deployment's template: through the Deployments using the source.
		note(l.byIndex(ctx, kind.Name(), &appsv1.DeploymentList{}, ns, id.String(), func(d client.Object) {
			tpl := &d.(*appsv1.Deployment).Spec.Template
			note(l.byIndex(ctx, kind.Name(), kind.NewList(), ns, workloadRef(d.GetName()), func(w client.Object) { add(w, tpl, d.GetName()) }))
		}))
	}
	note(l.configTargets(ctx, kind, ns, configs, id, labels, func(w client.Object) { add(w, kind.PodTemplate(w), "") }))
	return scanned, failed
}

// Referencing returns the workloads of kind in ns that run the template of Deployment d.
func (l Lookup) Referencing(ctx context.Context, kind workload.Kind, ns, deployment string) []client.Object {
	var out []client.Object
	_ = l.byIndex(ctx, kind.Name(), kind.NewList(), ns, workloadRef(deployment), func(w client.Object) { out = append(out, w) })
	return out
}

// Users returns, for each of kinds, the workloads in ns that reference or name source id, by
// the index alone (no rule is weighed).
func (l Lookup) Users(ctx context.Context, kinds []workload.Kind, ns string, id source.ID, fn func(workload.Kind, client.Object)) {
	for _, kind := range kinds {
		_ = l.byIndex(ctx, kind.Name(), kind.NewList(), ns, id.String(), func(o client.Object) { fn(kind, o) })
	}
}

// IndexReader is what a Lookup's Client may also do: read its indexes in place (Reading). ok is false for a type it has no index of, or whose first list is not in
// yet (a List, which waits for it, answers then). The list only names the type: it may be a
// typed nil pointer, and is not filled; the objects are the cache's own, not to be modified.
type IndexReader interface {
	Each(list client.ObjectList, ns, field, value string, fn func(client.Object)) (ok bool)
	// EachIn reads a namespace's objects in place, as a List in it would find them.
	EachIn(list client.ObjectList, ns string, fn func(client.Object)) (ok bool)
}

func (l Lookup) byIndex(ctx context.Context, kind string, list client.ObjectList, ns, value string, fn func(client.Object)) error {
	if ir, ok := l.Client.(IndexReader); ok && ir.Each(list, ns, IndexSources, value, fn) {
		return nil
	}
	if err := l.Client.List(ctx, list, client.InNamespace(ns), client.MatchingFields{IndexSources: value}, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing by source index", "kind", kind, "value", value)
		return err
	}
	return sourcecache.ForEach(list, fn)
}

// concerns decides whether candidate c (Referenced is filled in here) concerns workload w,
// whose pod template is tpl; plan holds the ReloaderConfigs of w's namespace.
func (l Lookup) concerns(ctx context.Context, w client.Object, tpl *corev1.PodTemplateSpec, plan *targetPlan, c reload.Candidate) bool {
	rules, _ := l.Policy.ParseRules(w.GetAnnotations(), tpl.Annotations)
	rules.Configs = plan.targeting(ctx, w).Rules
	for _, ref := range source.Refs(&tpl.Spec) {
		if ref.ID == c.ID {
			c.Referenced = true
			break
		}
	}
	ok, _ := l.Policy.Concerns(&rules, c)
	return ok
}

// ConfigsFor returns what the ReloaderConfigs targeting obj, of kind, add to its decision.
func (l Lookup) ConfigsFor(ctx context.Context, kind workload.Kind, obj client.Object) (reloaderconfig.Merged, error) {
	configs, err := l.NamespaceConfigs(ctx, obj.GetNamespace())
	if err != nil {
		return reloaderconfig.Merged{}, err
	}
	return l.Targeting(ctx, kind, configs, obj), nil
}

// Targeting merges those of configs, all of obj's namespace, that target obj.
func (l Lookup) Targeting(ctx context.Context, kind workload.Kind, configs []*reloaderconfig.Compiled, obj client.Object) reloaderconfig.Merged {
	return l.plan(kind, configs).targeting(ctx, obj)
}

// targetPlan is the targets of a namespace's ReloaderConfigs for one workload kind, made
// once for a lookup: each distinct target (kind, name, selector) is weighed once per
// workload however many configs and entries repeat it, and the configs targeting a workload
// are merged once per distinct set of them.
type targetPlan struct {
	kind    string
	configs []*reloaderconfig.Compiled
	// targets are the distinct targets of kind; of[i] the indexes of config i's.
	targets []reloaderconfig.Target
	of      [][]int
	// after[i] are config i's targets with an after list, in its order (by index in targets).
	after [][]afterOf
	// merged memoizes Merge by the set of configs targeting a workload.
	merged map[string]reloaderconfig.Merged
	// weighed counts the targets weighed against workloads (Lookup.Weighed).
	weighed *atomic.Int64
}

type afterOf struct {
	target int
	after  []string
}

// plan makes the targetPlan of configs, all of one namespace, for kind.
func (l Lookup) plan(kind workload.Kind, configs []*reloaderconfig.Compiled) *targetPlan {
	p := &targetPlan{kind: kind.Name(), configs: configs, of: make([][]int, len(configs)),
		after: make([][]afterOf, len(configs)), merged: map[string]reloaderconfig.Merged{}, weighed: l.Weighed}
	index := map[string]int{}
	for i, c := range configs {
		mine := map[int]bool{}
		for _, t := range c.Targets {
			if !strings.EqualFold(t.Kind, p.kind) {
				continue // Matches would refuse it for every workload of kind
			}
			key := t.Key()
			j, ok := index[key]
			if !ok {
				j = len(p.targets)
				index[key] = j
				p.targets = append(p.targets, reloaderconfig.Target{Kind: t.Kind, Name: t.Name, Selector: t.Selector})
			}
			if !mine[j] {
				mine[j] = true
				p.of[i] = append(p.of[i], j)
			}
			if len(t.After) > 0 {
				p.after[i] = append(p.after[i], afterOf{j, t.After})
			}
		}
	}
	return p
}

// targeting merges the configs of the plan that target obj.
func (p *targetPlan) targeting(ctx context.Context, obj client.Object) reloaderconfig.Merged {
	matched := make([]int8, len(p.targets)) // 0 not weighed yet, 1 matches, -1 does not
	matches := func(j int) bool {
		if matched[j] == 0 {
			matched[j] = -1
			if p.weighed != nil {
				p.weighed.Add(1)
			}
			if p.targets[j].Matches(p.kind, obj) {
				matched[j] = 1
			}
		}
		return matched[j] == 1
	}
	var targeting []*reloaderconfig.Compiled
	var key strings.Builder
	for i, c := range p.configs {
		for _, j := range p.of[i] {
			if matches(j) {
				targeting = append(targeting, c)
				key.WriteString(strconv.Itoa(i))
				key.WriteByte(',')
				break
			}
		}
	}
	m, ok := p.merged[key.String()]
	if !ok {
		m = reloaderconfig.Merge(targeting)
		p.merged[key.String()] = m
		for _, c := range m.Conflicts {
			log.FromContext(ctx).V(1).Info("conflicting ReloaderConfigs", "conflict", c.String())
		}
	}
	for i := range p.configs {
		for _, a := range p.after[i] {
			if matched[a.target] == 1 {
				m.Overrides.After = append(m.Overrides.After, a.after...)
			}
		}
	}
	return m
}

// NamespaceConfigs returns the ReloaderConfigs of namespace ns the decisions weigh,
// compiled, in name order: all of them within the namespace's limits
// (reloaderconfig.Considered); none when the ReloaderConfig API is not read.
func (l Lookup) NamespaceConfigs(ctx context.Context, ns string) ([]*reloaderconfig.Compiled, error) {
	kept, _, err := l.EveryNamespaceConfig(ctx, ns)
	return kept, err
}

// EveryNamespaceConfig returns the ReloaderConfigs of namespace ns, compiled, split into
// those the decisions weigh and those past the namespace's limits.
func (l Lookup) EveryNamespaceConfig(ctx context.Context, ns string) (kept, left []*reloaderconfig.Compiled, err error) {
	if l.Configs == nil {
		return nil, nil, nil
	}
	var out []*reloaderconfig.Compiled
	if err := EachConfig(ctx, l.Client, ns, func(cfg *v1alpha1.ReloaderConfig) { out = append(out, l.Configs.Get(cfg)) }); err != nil {
		return nil, nil, err
	}
	kept, left = reloaderconfig.Considered(out)
	return kept, left, nil
}

// EachConfig calls fn with each ReloaderConfig of namespace ns, which fn must not change:
// asked on each source event and reconcile, they are read in place where c can
// (IndexReader), else listed without copies.
func EachConfig(ctx context.Context, c client.Reader, ns string, fn func(*v1alpha1.ReloaderConfig)) error {
	each := func(o client.Object) {
		if cfg, ok := o.(*v1alpha1.ReloaderConfig); ok {
			fn(cfg)
		}
	}
	if ir, ok := c.(IndexReader); ok && ir.EachIn((*v1alpha1.ReloaderConfigList)(nil), ns, each) {
		return nil
	}
	list := &v1alpha1.ReloaderConfigList{}
	if err := c.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("list ReloaderConfigs in %s: %w", ns, err)
	}
	for i := range list.Items {
		fn(&list.Items[i])
	}
	return nil
}

// configTargets calls fn with each workload of kind in ns that one of configs (those of ns)
// with a rule for the source id (labelled srcLabels) targets. Auto rules are left out: the
// source index already finds the workloads that reference the source. A target repeated by
// several configs (or entries) is read once; a target choosing every workload makes the
// others needless.
func (l Lookup) configTargets(ctx context.Context, kind workload.Kind, ns string, configs []*reloaderconfig.Compiled, id source.ID, srcLabels map[string]string, fn func(client.Object)) error {
	var targets []reloaderconfig.Target
	seen := map[string]bool{}
	for _, c := range configs {
		if !c.HasRuleFor(id, srcLabels) {
			continue
		}
		for _, t := range c.Targets {
			if t.Kind != kind.Name() {
				continue
			}
			key := t.Key()
			if key == "nothing" {
				continue // chooses no workload
			}
			if t.Name == "" && (t.Selector == nil || t.Selector.Empty()) {
				// Every workload of kind: one list serves all.
				t.Selector = labels.Everything()
				targets, seen = []reloaderconfig.Target{t}, nil
				break
			}
			if !seen[key] {
				seen[key] = true
				targets = append(targets, t)
			}
		}
		if seen == nil {
			break
		}
	}
	var failed error
	for _, t := range targets {
		if _, err := l.TargetsOf(ctx, kind, ns, t, fn); err != nil {
			log.FromContext(ctx).Error(err, "reading the targets of ReloaderConfigs", "kind", kind.Name())
			if failed == nil {
				failed = err
			}
		}
	}
	return failed
}

// EachTarget calls fn with each workload of kind in ns that config c targets, and returns the
// first read that failed (each is logged).
func (l Lookup) EachTarget(ctx context.Context, kind workload.Kind, ns string, c *reloaderconfig.Compiled, fn func(client.Object)) error {
	var failed error
	for _, t := range c.Targets {
		if t.Kind != kind.Name() {
			continue
		}
		if _, err := l.TargetsOf(ctx, kind, ns, t, fn); err != nil {
			log.FromContext(ctx).Error(err, "reading the targets of a ReloaderConfig", "config", c.Name)
			if failed == nil {
				failed = err
			}
		}
	}
	return failed
}

// TargetsOf calls fn with each workload of kind in ns that target t chooses, from the cache,
// and returns how many there were: a named target that does not exist is none, not an error.
// The workload reconcilers and the status controller both resolve targets through it.
func (l Lookup) TargetsOf(ctx context.Context, kind workload.Kind, ns string, t reloaderconfig.Target, fn func(client.Object)) (int, error) {
	if t.Name != "" {
		obj := kind.NewObject()
		err := l.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: t.Name}, obj)
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("get %s %s/%s: %w", kind.Name(), ns, t.Name, err)
		}
		fn(obj)
		return 1, nil
	}
	list := kind.NewList()
	if err := l.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: t.Selector}, client.UnsafeDisableDeepCopy); err != nil {
		return 0, fmt.Errorf("list %ss in %s: %w", kind.Name(), ns, err)
	}
	found := 0
	err := sourcecache.ForEach(list, func(obj client.Object) { found++; fn(obj) })
	return found, err
}

// Concerned returns the sources that concern a workload of ns whose pod template is tpl and
// whose rules are rules, by ID. A referenced or literally named source that does not exist is
// returned with the Absent hash, so that its creation can be noticed later; pooled sources
// exist only while mounted, and are left out instead. When weighed is not nil, each source
// the decision looked at is appended to it, with the answer, in the order it was weighed
// (explain shows them).
func (l Lookup) Concerned(ctx context.Context, ns string, tpl *corev1.PodTemplateSpec, rules *reload.Rules, weighed *[]Weighed) (map[source.ID]sourcecache.Observed, error) {
	refs := map[source.ID]*source.Ref{}
	for _, ref := range source.Refs(&tpl.Spec) {
		refs[ref.ID] = &ref
	}
	out := map[source.ID]sourcecache.Observed{}
	for _, st := range l.Sources {
		consider := func(name string, s sourcecache.Snapshot, exists bool) {
			id := source.ID{Kind: st.Kind, Name: name}
			ref := refs[id]
			c := reload.Candidate{ID: id, Annotations: s.Annotations(), Labels: s.Labels(), Referenced: ref != nil}
			ok, why := l.Policy.Concerns(rules, c)
			if weighed != nil {
				*weighed = append(*weighed, weigh(rules, c, Weighed{Concerns: ok, Reason: why, Exists: exists}))
			}
			switch {
			case !ok:
			case exists:
				out[id] = st.Observe(c, why, s, ref, rules, &tpl.Spec)
			case st.Pool == nil:
				out[id] = st.Observe(c, why, sourcecache.AbsentSnapshot(), ref, rules, &tpl.Spec)
			}
		}
		wanted := append(append([]string(nil), rules.Literal[st.Kind]...), rules.ConfigLiterals(st.Kind)...)
		for id := range refs {
			if id.Kind == st.Kind {
				wanted = append(wanted, id.Name)
			}
		}
		if rules.HasNamed(st.Kind) || rules.ConfigSelects(st.Kind) {
			// Named entries are regular expressions, config selectors match labels: match them
			// against the namespace's sources.
			all, err := l.SourcesIn(ctx, st, ns)
			if err != nil {
				return nil, err
			}
			for name, s := range all {
				consider(name, s, true)
			}
			for _, name := range wanted {
				if _, ok := all[name]; !ok {
					consider(name, sourcecache.Snapshot{}, false)
				}
			}
			continue
		}
		for _, name := range wanted {
			s, ok, err := l.Source(ctx, st, ns, name)
			if err != nil {
				return nil, err
			}
			consider(name, s, ok)
		}
	}
	return out, nil
}

// Weighed is one source the decision looked at for a workload, and its answer.
type Weighed struct {
	ID       source.ID
	Concerns bool
	Reason   reload.Reason
	// Exists is false for a named or referenced source that does not exist.
	Exists     bool
	Referenced bool
	// Named is true when the workload's reload or exclude annotations, or a ReloaderConfig
	// that targets it, name or select the source.
	Named bool
}

// weigh completes w, the answer on candidate c under rules, for explain.
func weigh(rules *reload.Rules, c reload.Candidate, w Weighed) Weighed {
	w.ID, w.Referenced = c.ID, c.Referenced
	w.Named = rules.Named[c.ID.Kind].Match(c.ID.Name) || rules.Exclude[c.ID.Kind].Match(c.ID.Name)
	for i := range rules.Configs {
		if chosen, _ := rules.Configs[i].Chooses(c); chosen {
			w.Named = true
		}
	}
	return w
}
