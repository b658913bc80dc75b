package reload

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/reloader-operator/reloader/internal/source"
)

// ConfigRule is one source rule of a ReloaderConfig that targets the workload: the sources it
// chooses concern the workload as a named annotation entry would.
type ConfigRule struct {
	// Config names the ReloaderConfig, for reasons people read.
	Config string
	Kind   source.Kind
	// Exactly one of Name, Selector and Auto chooses the sources.
	Name     string
	Selector labels.Selector
	// Auto chooses the sources of Kind the workload references.
	Auto bool
	// Keys and AutoKeys limit the hash to some keys (see Rules.KeysOf).
	Keys     []string
	AutoKeys bool
}

// Reasons a ReloaderConfig makes a source concern a workload.
const (
	ReasonConfigName     Reason = "named by ReloaderConfig"
	ReasonConfigSelector Reason = "selected by label in ReloaderConfig"
	ReasonConfigAuto     Reason = "referenced, and chosen by auto in ReloaderConfig"
)

// Chooses reports whether the rule chooses candidate c, and how.
func (cr *ConfigRule) Chooses(c Candidate) (bool, Reason) {
	switch {
	case cr.Kind != c.ID.Kind:
		return false, ""
	case cr.Name != "":
		return cr.Name == c.ID.Name, ReasonConfigName
	case cr.Selector != nil:
		return cr.Selector.Matches(labels.Set(c.Labels)), ReasonConfigSelector
	case cr.Auto:
		return c.Referenced, ReasonConfigAuto
	}
	return false, ""
}

// byConfig returns the first config rule that chooses c, in the order of r.Configs.
func (r *Rules) byConfig(c Candidate) (*ConfigRule, Reason) {
	for i := range r.Configs {
		if ok, why := r.Configs[i].Chooses(c); ok {
			return &r.Configs[i], why + " " + Reason(r.Configs[i].Config)
		}
	}
	return nil, ""
}

// ConfigLiterals are the source names of kind that config rules choose by name: they concern
// the workload before the source exists, as literal annotation entries do.
func (r *Rules) ConfigLiterals(kind source.Kind) []string {
	var out []string
	for _, cr := range r.Configs {
		if cr.Kind == kind && cr.Name != "" {
			out = append(out, cr.Name)
		}
	}
	return out
}

// ConfigSelects reports whether some config rule chooses sources of kind by label, so that
// the namespace's sources of that kind must be looked at.
func (r *Rules) ConfigSelects(kind source.Kind) bool {
	for _, cr := range r.Configs {
		if cr.Kind == kind && cr.Selector != nil {
			return true
		}
	}
	return false
}

// Overrides are the settings a ReloaderConfig changes for its targets; nil fields keep the
// flag's value.
type Overrides struct {
	// Config names the ReloaderConfig they come from.
	Config            string
	Strategy          Strategy
	PausePeriod       *time.Duration
	CoalesceWindow    *time.Duration
	MinReloadInterval *time.Duration
	// ReloadWindow is a reload-window value (ParseReloadWindows), checked; "" sets none.
	ReloadWindow         string
	RunCronJobs          *bool
	RecreateFinishedJobs *bool
	// Mode is a checked mode (internal/approval: reload, notify, approve); "" sets none.
	Mode string
	// Waves, when set, says whether the targets roll in health-gated waves (internal/waves).
	Waves *bool
	// After are, for one workload, the workloads its targets' after lists name (unparsed, as
	// the reloader.dev/after annotation): the union over the configs targeting it.
	After []string
}

// ByConfig reports whether the reason is a ReloaderConfig's rule, not an annotation.
func (why Reason) ByConfig() bool {
	for _, r := range []Reason{ReasonConfigName, ReasonConfigSelector, ReasonConfigAuto} {
		if strings.HasPrefix(string(why), string(r)) {
			return true
		}
	}
	return false
}

// KeysFor is KeysOf for candidate c, which concerns the workload for reason why. A source only
// ReloaderConfigs bring in is restricted as annotations restrict: the keys their rules list
// for it (the union, when several do) win; otherwise, when every rule choosing it has
// autoKeys, the keys the pod spec reads (whole when it reads the source whole); otherwise it
// counts whole. A source the annotations concern is restricted by the annotations alone.
//
// The workload's own keys annotations (a list for the source, or used-keys-only) win over
// the configs' keys, as they win over its other rules.
func (r *Rules) KeysFor(c Candidate, why Reason, spec *corev1.PodSpec) (keys []string, restricted bool) {
	if _, listed := r.KeyLists[c.ID.Kind].Of(c.ID.Name); !why.ByConfig() || listed || r.UsedKeysOnly {
		return r.KeysOf(c.ID, spec)
	}
	if _, hasKeys := keysAnnotations[c.ID.Kind]; !hasKeys {
		return nil, false
	}
	autoKeys := true
	for i := range r.Configs {
		cr := &r.Configs[i]
		if ok, _ := cr.Chooses(c); ok {
			keys = append(keys, cr.Keys...)
			autoKeys = autoKeys && cr.AutoKeys
		}
	}
	if len(keys) > 0 {
		slices.Sort(keys)
		return slices.Compact(keys), true
	}
	if !autoKeys {
		return nil, false
	}
	use, read := source.UsedKeys(spec)[c.ID]
	if !read || use.Whole {
		return nil, false
	}
	return use.Keys, true
}
