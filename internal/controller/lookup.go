package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
	"github.com/reloader-operator/reloader/internal/source"
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
	Sources []SourceType
	Policy  reload.Policy
	// Configs compiles the ReloaderConfigs; nil when their API is not read, and only the
	// annotations apply.
	Configs *reloaderconfig.Cache
	// Namespaces selects, by label, the namespaces whose workloads reload; nil selects all.
	Namespaces labels.Selector
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
func (l Lookup) SourceName(st SourceType, o client.Object) string { return st.sourceName(o) }

// SourceType returns how the source kind is read; ok is false for a kind not read.
func (l Lookup) SourceType(kind source.Kind) (SourceType, bool) {
	for _, st := range l.Sources {
		if st.Kind == kind {
			return st, true
		}
	}
	return SourceType{}, false
}

// Object is a watched object of the source, for Events; nil when the source is gone.
func (s snapshot) Object() client.Object { return s.obj }

// Hash is the source's content hash.
func (s snapshot) Hash() string { return s.hash }

// Annotations and Labels are the source's own, as the cache keeps them.
func (s snapshot) Annotations() map[string]string { return s.annotations }

// Labels: see Annotations.
func (s snapshot) Labels() map[string]string { return s.labels }

// Source reads one source of type st; exists is false when it does not exist.
func (l Lookup) Source(ctx context.Context, st SourceType, ns, name string) (s snapshot, exists bool, err error) {
	return st.get(ctx, l.Client, ns, name)
}

// SourcesIn reads every source of type st in a namespace, by name.
func (l Lookup) SourcesIn(ctx context.Context, st SourceType, ns string) (map[string]snapshot, error) {
	return st.all(ctx, l.Client, ns)
}

// Affected returns the workloads of kind in ns that a change of source id concerns, found as
// the controller finds them for a source event; annotations and labels are the source's.
func (l Lookup) Affected(ctx context.Context, kind workload.Kind, ns string, id source.ID, annotations, labels map[string]string) []client.Object {
	var out []client.Object
	_, _ = l.affected(ctx, kind, ns, id, annotations, labels, func(w client.Object) { out = append(out, w) })
	return out
}

// affected calls fn once for each workload of kind in ns that source id concerns; annotations
// and labels are the source's own. It returns how many workloads the lookups found: through
// the index, and the targets of the ReloaderConfigs with a rule for the source; and the first
// lookup that failed (each failure is logged), after which fn may have missed workloads. From
// the cache a lookup never fails; a live one (degraded mode) can.
func (l Lookup) affected(ctx context.Context, kind workload.Kind, ns string, id source.ID, annotations, labels map[string]string, fn func(client.Object)) (scanned int, failed error) {
	// Listed once here, not once per workload found.
	configs, err := l.NamespaceConfigs(ctx, ns)
	if err != nil {
		log.FromContext(ctx).Error(err, "reading ReloaderConfigs; their rules are left out of this lookup")
	}
	// A Rollout may be found twice, with its own template and with its Deployment's.
	visited, seen := map[string]bool{}, map[string]bool{}
	add := func(w client.Object, tpl *corev1.PodTemplateSpec) {
		if !visited[w.GetName()] {
			visited[w.GetName()] = true
			scanned++
		}
		if seen[w.GetName()] || !l.concerns(ctx, kind, w, tpl, configs, reload.Candidate{ID: id, Annotations: annotations, Labels: labels}) {
			return
		}
		seen[w.GetName()] = true
		fn(w)
	}
	note := func(err error) {
		if failed == nil {
			failed = err
		}
	}
	for _, value := range []string{id.String(), anyOf(id.Kind)} {
		note(l.byIndex(ctx, kind.Name(), kind.NewList(), ns, value, func(w client.Object) {
			add(w, kind.PodTemplate(w))
		}))
	}
	if _, ok := kind.(workload.Referencing); ok {
		// Rollouts that run a Deployment's template: through the Deployments using the source.
		note(l.byIndex(ctx, kind.Name(), &appsv1.DeploymentList{}, ns, id.String(), func(d client.Object) {
			tpl := &d.(*appsv1.Deployment).Spec.Template
			note(l.byIndex(ctx, kind.Name(), kind.NewList(), ns, workloadRef(d.GetName()), func(w client.Object) { add(w, tpl) }))
		}))
	}
	note(l.configTargets(ctx, kind, ns, configs, id, labels, func(w client.Object) { add(w, kind.PodTemplate(w)) }))
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

func (l Lookup) byIndex(ctx context.Context, kind string, list client.ObjectList, ns, value string, fn func(client.Object)) error {
	if err := l.Client.List(ctx, list, client.InNamespace(ns), client.MatchingFields{IndexSources: value}, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing by source index", "kind", kind, "value", value)
		return err
	}
	return forEach(list, fn)
}

// concerns decides whether candidate c (Referenced is filled in here) concerns workload w of
// kind, whose pod template is tpl; configs are the ReloaderConfigs of w's namespace.
func (l Lookup) concerns(ctx context.Context, kind workload.Kind, w client.Object, tpl *corev1.PodTemplateSpec, configs []*reloaderconfig.Compiled, c reload.Candidate) bool {
	rules, _ := l.Policy.ParseRules(w.GetAnnotations(), tpl.Annotations)
	rules.Configs = l.Targeting(ctx, kind, configs, w).Rules
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
	var targeting []*reloaderconfig.Compiled
	for _, c := range configs {
		if c.TargetsWorkload(kind.Name(), obj) {
			targeting = append(targeting, c)
		}
	}
	m := reloaderconfig.Merge(targeting)
	for _, c := range targeting {
		for _, t := range c.Targets {
			if len(t.After) > 0 && t.Matches(kind.Name(), obj) {
				m.Overrides.After = append(m.Overrides.After, t.After...)
			}
		}
	}
	for _, c := range m.Conflicts {
		log.FromContext(ctx).V(1).Info("conflicting ReloaderConfigs", "conflict", c.String())
	}
	return m
}

// NamespaceConfigs returns every ReloaderConfig of namespace ns, compiled; none when the
// ReloaderConfig API is not read.
func (l Lookup) NamespaceConfigs(ctx context.Context, ns string) ([]*reloaderconfig.Compiled, error) {
	if l.Configs == nil {
		return nil, nil
	}
	list := &v1alpha1.ReloaderConfigList{}
	if err := l.Client.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list ReloaderConfigs in %s: %w", ns, err)
	}
	out := make([]*reloaderconfig.Compiled, len(list.Items))
	for i := range list.Items {
		out[i] = l.Configs.Get(&list.Items[i])
	}
	return out, nil
}

// configTargets calls fn with each workload of kind in ns that one of configs (those of ns)
// with a rule for the source id (labelled srcLabels) targets. Auto rules are left out: the
// source index already finds the workloads that reference the source.
func (l Lookup) configTargets(ctx context.Context, kind workload.Kind, ns string, configs []*reloaderconfig.Compiled, id source.ID, srcLabels map[string]string, fn func(client.Object)) error {
	var failed error
	for _, c := range configs {
		for _, rule := range c.Rules {
			if rule.Kind != id.Kind || rule.Auto || (rule.Name != "" && rule.Name != id.Name) ||
				(rule.Selector != nil && !rule.Selector.Matches(labels.Set(srcLabels))) {
				continue
			}
			if err := l.EachTarget(ctx, kind, ns, c, fn); err != nil && failed == nil {
				failed = err
			}
			break
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
	err := forEach(list, func(obj client.Object) { found++; fn(obj) })
	return found, err
}

// Concerned returns the sources that concern a workload of ns whose pod template is tpl and
// whose rules are rules, by ID. A referenced or literally named source that does not exist is
// returned with the Absent hash, so that its creation can be noticed later; pooled sources
// exist only while mounted, and are left out instead. When weighed is not nil, each source
// the decision looked at is appended to it, with the answer, in the order it was weighed
// (explain shows them).
func (l Lookup) Concerned(ctx context.Context, ns string, tpl *corev1.PodTemplateSpec, rules *reload.Rules, weighed *[]Weighed) (map[source.ID]observed, error) {
	refs := map[source.ID]*source.Ref{}
	for _, ref := range source.Refs(&tpl.Spec) {
		refs[ref.ID] = &ref
	}
	out := map[source.ID]observed{}
	for _, st := range l.Sources {
		consider := func(name string, s snapshot, exists bool) {
			id := source.ID{Kind: st.Kind, Name: name}
			ref := refs[id]
			c := reload.Candidate{ID: id, Annotations: s.annotations, Labels: s.labels, Referenced: ref != nil}
			ok, why := l.Policy.Concerns(rules, c)
			if weighed != nil {
				*weighed = append(*weighed, weigh(rules, c, Weighed{Concerns: ok, Reason: why, Exists: exists}))
			}
			switch {
			case !ok:
			case exists:
				out[id] = st.observe(c, why, s, ref, rules, &tpl.Spec)
			case st.Pool == nil:
				out[id] = st.observe(c, why, snapshot{hash: reload.Absent}, ref, rules, &tpl.Spec)
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
					consider(name, snapshot{}, false)
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

func forEach(list client.ObjectList, fn func(client.Object)) error {
	return apimeta.EachListItem(list, func(o runtime.Object) error {
		if co, ok := o.(client.Object); ok {
			fn(co)
		}
		return nil
	})
}

// Snapshot is a source as one read sees it (Lookup.Source, Lookup.SourcesIn).
type Snapshot = snapshot

// HashOf is the hash of a watched object of the source type as a workload observes it: of the
// given keys when restricted, of the whole content otherwise; Absent for no object.
func (t SourceType) HashOf(o client.Object, keys []string, restricted bool) string {
	return t.hashOf(o, keys, restricted)
}

// KeyDigestsOf is the digest of each key of a watched object, cached or full.
func (t SourceType) KeyDigestsOf(o client.Object) map[string]string { return t.keyDigests(o) }

// CachedHash is the content hash the cache keeps of a source; empty for a full object.
func CachedHash(o client.Object) string { return cachedHash(o) }

// ForEach calls fn with each object of list.
func ForEach(list client.ObjectList, fn func(client.Object)) error { return forEach(list, fn) }
