// Package reloaderconfig turns ReloaderConfigs into the rules the reload decision takes: which
// workloads they target, the source rules they add, and the settings they override.
package reloaderconfig

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/approval"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
)

// Compiled is a ReloaderConfig made ready for decisions: selectors parsed once.
type Compiled struct {
	Name       string
	UID        types.UID
	Generation int64
	Targets    []Target
	// Generic are the generic targets (spec.genericTargets) that compiled.
	Generic   []GenericTarget
	Rules     []reload.ConfigRule
	Overrides reload.Overrides
	// Errs are the parts of the spec that could not be used (the schema refuses most bad
	// specs; these are what it can't check). The rest of the config still applies.
	Errs []error
	// strategy is the spec's strategy name, to compare configs.
	strategy string
}

// Target is one target of a config: workloads of Kind, by Name or Selector.
type Target struct {
	Kind     string
	Name     string
	Selector labels.Selector
	// After are the workloads the target's roll after in waves ("deployment/db"), unparsed:
	// the waves parse them as the reloader.dev/after annotation, with its bounds.
	After []string
}

// Matches reports whether the target chooses the workload obj of kind.
func (t Target) Matches(kind string, obj client.Object) bool {
	if !strings.EqualFold(t.Kind, kind) {
		return false
	}
	if t.Name != "" {
		return t.Name == obj.GetName()
	}
	return t.Selector != nil && t.Selector.Matches(labels.Set(obj.GetLabels()))
}

// Key names what the target chooses, by name or by selector; targets with the same key
// choose the same workloads. "none": no selector (a target with neither name nor selector);
// "nothing": a selector that did not compile, which chooses no workload.
func (t Target) Key() string {
	switch {
	case t.Name != "":
		return "name\x00" + t.Name
	case t.Selector == nil:
		return "none"
	case !t.Selector.Empty() && t.Selector.String() == "":
		return "nothing"
	}
	return "selector\x00" + t.Selector.String()
}

// TargetsWorkload reports whether the config targets the workload obj of kind.
func (c *Compiled) TargetsWorkload(kind string, obj client.Object) bool {
	for _, t := range c.Targets {
		if t.Matches(kind, obj) {
			return true
		}
	}
	return false
}

// HasRuleFor reports whether a rule of the config, other than an auto rule, chooses source id
// labelled srcLabels: then every target of the config is concerned by its changes.
func (c *Compiled) HasRuleFor(id source.ID, srcLabels map[string]string) bool {
	for _, rule := range c.Rules {
		if rule.Kind != id.Kind || rule.Auto || (rule.Name != "" && rule.Name != id.Name) ||
			(rule.Selector != nil && !rule.Selector.Matches(labels.Set(srcLabels))) {
			continue
		}
		return true
	}
	return false
}

// maxAfter bounds a target's after list (its schema's maxItems), for a spec stored under an
// older CRD.
const maxAfter = 32

// Compile reads a ReloaderConfig.
func Compile(cfg *v1alpha1.ReloaderConfig) *Compiled {
	c := &Compiled{Name: cfg.Name, UID: cfg.UID, Generation: cfg.Generation}
	selector := func(where string, s *v1alpha1.LabelSelector, all bool) labels.Selector {
		if all {
			return labels.Everything()
		}
		if s == nil {
			return nil
		}
		if err := checkSelector(s); err != nil {
			c.Errs = append(c.Errs, fmt.Errorf("%s.selector: %w", where, err))
			return labels.Nothing()
		}
		sel, err := metav1.LabelSelectorAsSelector(s.Meta())
		if err != nil {
			c.Errs = append(c.Errs, fmt.Errorf("%s.selector: %w", where, err))
			return labels.Nothing()
		}
		return sel
	}
	for i, t := range bounded(cfg.Spec.Targets, v1alpha1.MaxTargets) {
		c.Targets = append(c.Targets, Target{Kind: t.Kind, Name: t.Name,
			Selector: selector(fmt.Sprintf("spec.targets[%d]", i), t.Selector, t.All), After: bounded(t.After, maxAfter)})
	}
	for i, s := range bounded(cfg.Spec.Sources, v1alpha1.MaxSources) {
		kind, ok := sourceKind(s.Kind)
		if !ok {
			c.Errs = append(c.Errs, fmt.Errorf("spec.sources[%d].kind: %q is neither ConfigMap nor Secret", i, s.Kind))
			continue
		}
		c.Rules = append(c.Rules, reload.ConfigRule{
			Config: cfg.Name, Kind: kind, Name: s.Name, Auto: s.Auto,
			Selector: selector(fmt.Sprintf("spec.sources[%d]", i), s.Selector, s.All),
			Keys:     slices.Clone(bounded(s.Keys, v1alpha1.MaxKeys)), AutoKeys: s.AutoKeys,
		})
	}
	for i, t := range bounded(cfg.Spec.GenericTargets, MaxGenericTargets) {
		g, err := compileGeneric(t)
		if err != nil {
			c.Errs = append(c.Errs, fmt.Errorf("spec.genericTargets[%d]: %w", i, err))
			continue
		}
		c.Generic = append(c.Generic, g)
	}
	c.Overrides, c.strategy = overrides(cfg, &c.Errs), cfg.Spec.Strategy
	return c
}

// checkSelector holds a selector to the CRD's rules again: the API server checks them only
// on writes under a CRD that has them, and a config stored before (or under a CRD that helm
// upgrade left as it was) could hold an empty selector, which would choose everything, or
// one big enough to cost every reconcile that reads it.
func checkSelector(s *v1alpha1.LabelSelector) error {
	switch {
	case len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0:
		return errors.New("an empty selector would choose everything: give matchLabels or matchExpressions, or set all: true instead of selector to choose every one")
	case len(s.MatchLabels) > v1alpha1.MaxMatchLabels:
		return fmt.Errorf("%d matchLabels, over the limit of %d", len(s.MatchLabels), v1alpha1.MaxMatchLabels)
	case len(s.MatchExpressions) > v1alpha1.MaxMatchExpressions:
		return fmt.Errorf("%d matchExpressions, over the limit of %d", len(s.MatchExpressions), v1alpha1.MaxMatchExpressions)
	}
	for k, v := range s.MatchLabels {
		if err := checkLabel(k, v); err != nil {
			return fmt.Errorf("matchLabels: %w", err)
		}
	}
	for i, e := range s.MatchExpressions {
		if len(e.Values) > v1alpha1.MaxSelectorValues {
			return fmt.Errorf("matchExpressions[%d]: %d values, over the limit of %d", i, len(e.Values), v1alpha1.MaxSelectorValues)
		}
		if e.Key == "" {
			return fmt.Errorf("matchExpressions[%d]: empty key", i)
		}
		for _, v := range append([]string{""}, e.Values...) {
			if err := checkLabel(e.Key, v); err != nil {
				return fmt.Errorf("matchExpressions[%d]: %w", i, err)
			}
		}
	}
	return nil
}

func checkLabel(k, v string) error {
	switch {
	case len(k) > v1alpha1.MaxLabelKeyLength:
		return fmt.Errorf("a key of %d characters, over the limit of %d", len(k), v1alpha1.MaxLabelKeyLength)
	case len(v) > v1alpha1.MaxLabelValueLength:
		return fmt.Errorf("a value of %d characters, over the limit of %d", len(v), v1alpha1.MaxLabelValueLength)
	}
	return nil
}

func overrides(cfg *v1alpha1.ReloaderConfig, errs *[]error) reload.Overrides {
	o := reload.Overrides{Config: cfg.Name, RunCronJobs: cfg.Spec.RunCronJobsOnReload,
		RecreateFinishedJobs: cfg.Spec.RecreateFinishedJobs}
	if cfg.Spec.Strategy != "" {
		s, err := reload.NewStrategy(cfg.Spec.Strategy)
		if err != nil {
			*errs = append(*errs, fmt.Errorf("spec.strategy: %w", err))
		} else {
			o.Strategy = s
		}
	}
	if d := cfg.Spec.PausePeriod; d != nil {
		o.PausePeriod = &d.Duration
	}
	if d := cfg.Spec.CoalesceWindow; d != nil {
		o.CoalesceWindow = &d.Duration
	}
	if d := cfg.Spec.MinReloadInterval; d != nil {
		o.MinReloadInterval = &d.Duration
	}
	o.Waves = cfg.Spec.Waves
	if m := cfg.Spec.Mode; m != "" {
		if mode, err := approval.ParseMode(m); err != nil {
			*errs = append(*errs, fmt.Errorf("spec.mode: %w", err))
		} else {
			o.Mode = string(mode)
		}
	}
	if w := cfg.Spec.ReloadWindow; w != "" {
		if _, err := reload.ParseReloadWindows(w); err != nil {
			*errs = append(*errs, fmt.Errorf("spec.reloadWindow: %v; want %s", err, reload.ReloadWindowForm))
		} else {
			o.ReloadWindow = w
		}
	}
	return o
}

func sourceKind(k string) (source.Kind, bool) {
	switch strings.ToLower(k) {
	case "configmap":
		return source.ConfigMap, true
	case "secret":
		return source.Secret, true
	}
	return "", false
}

// bounded cuts a list at the schema's limit, should an object ever bypass it.
func bounded[T any](s []T, n int) []T { return s[:min(len(s), n)] }

// Cache compiles each config once per generation. It holds one entry per config seen; Forget
// drops a deleted one.
type Cache struct {
	mu      sync.Mutex
	entries map[types.UID]*Compiled
}

// maxCached bounds the cache should configs be deleted faster than they are forgotten.
const maxCached = 100_000

// Get returns the compiled form of cfg.
func (c *Cache) Get(cfg *v1alpha1.ReloaderConfig) *Compiled {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[cfg.UID]; ok && e.Generation == cfg.Generation && cfg.UID != "" {
		return e
	}
	e := Compile(cfg)
	if c.entries == nil || len(c.entries) >= maxCached {
		c.entries = map[types.UID]*Compiled{}
	}
	c.entries[cfg.UID] = e
	return e
}

// Forget drops a deleted config.
func (c *Cache) Forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, uid)
}

// The ReloaderConfigs of one namespace that the decisions weigh are bounded: every source
// event of the namespace weighs their targets against the workloads it finds. Past either
// bound, the configs last in name order are left out whole (their rules do not apply) and
// their status says so.
const (
	MaxNamespaceConfigs = 64
	MaxNamespaceTargets = 512
)

// Considered sorts a namespace's configs by name and splits them into those the decisions
// weigh and those left out: the first MaxNamespaceConfigs, while their targets add up to at
// most MaxNamespaceTargets.
func Considered(configs []*Compiled) (kept, left []*Compiled) {
	configs = slices.Clone(configs)
	slices.SortFunc(configs, func(a, b *Compiled) int { return strings.Compare(a.Name, b.Name) })
	targets := 0
	for i, c := range configs {
		targets += len(c.Targets)
		if i >= MaxNamespaceConfigs || targets > MaxNamespaceTargets {
			return configs[:i], configs[i:]
		}
	}
	return configs, nil
}

// LeftOut says why Considered left configs out, for their status.
func LeftOut() string {
	return fmt.Sprintf("left out, with its rules: the namespace's ReloaderConfigs, taken in name order, exceed %d configs or %d targets in all", MaxNamespaceConfigs, MaxNamespaceTargets)
}
