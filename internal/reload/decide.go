package reload

import (
	"strings"

	"github.com/reloader-operator/reloader/internal/source"
)

// Reason says why a source does or does not concern a workload. `explain`, Events and logs
// print it.
type Reason string

// Reasons a source concerns a workload.
const (
	ReasonNamed         Reason = "named in the reload annotation"
	ReasonSearch        Reason = "referenced, and the source carries the match annotation"
	ReasonAuto          Reason = "referenced, and the workload has the auto annotation"
	ReasonTypedAuto     Reason = "referenced, and the workload has the typed auto annotation"
	ReasonAutoReloadAll Reason = "referenced, and --auto-reload-all is on"
)

// Reasons a source does not.
const (
	ReasonKindIgnored   Reason = "this kind of source is ignored (--resources-to-ignore)"
	ReasonSourceIgnored Reason = "the source carries the ignore annotation"
	ReasonExcluded      Reason = "excluded by the workload's exclude annotation"
	ReasonOptedOut      Reason = "the workload's auto annotation is false"
	ReasonNotReferenced Reason = "not referenced by the pod template, nor named"
	ReasonNoRule        Reason = "referenced, but no reload annotation applies"
)

// Policy is the cluster-wide part of the decision, set by flags.
type Policy struct {
	Keys          Keys
	AutoReloadAll bool
	IgnoredKinds  map[source.Kind]bool
	// Caches memoize what the decisions parse, for one manager; nil: none.
	Caches *Caches
}

// ParseRules reads a workload's rules (ParseRules) with p's keys, through p's caches.
func (p *Policy) ParseRules(meta, template map[string]string) (Rules, []error) {
	return p.Caches.ParseRules(p.Keys, meta, template)
}

// Candidate is a source as the decision sees it.
type Candidate struct {
	ID source.ID
	// Annotations of the source object; nil when it does not exist.
	Annotations map[string]string
	// Labels of the source object, for ReloaderConfig selectors.
	Labels map[string]string
	// Referenced is true when the workload's pod template refers to the source.
	Referenced bool
}

// Concerns decides whether a source concerns a workload. Ignored kinds and the source's ignore
// annotation win over every rule; then the workload's annotations decide (byAnnotations); a
// source they leave out, excluded ones included, may still be chosen by a ReloaderConfig
// that targets the workload: its rules add to the annotations, they never remove.
func (p *Policy) Concerns(r *Rules, c Candidate) (bool, Reason) {
	ok, why := p.byAnnotations(r, c)
	if ok || why == ReasonKindIgnored || why == ReasonSourceIgnored {
		return ok, why
	}
	if rule, by := r.byConfig(c); rule != nil {
		return true, by
	}
	return false, why
}

// Ignores reports whether a source of kind with these annotations concerns no workload,
// whatever the workload's rules: its kind is ignored, or it carries the ignore annotation.
// Concerns refuses such a source first; a lookup of the workloads it concerns stops here.
func (p *Policy) Ignores(kind source.Kind, annotations map[string]string) bool {
	return p.IgnoredKinds[kind] || isTrue(annotations[p.Keys.Ignore])
}

// byAnnotations applies upstream Reloader's decision order: ignored kind, the source's ignore
// annotation, exclude lists (exact names), named entries (names, or anchored patterns), search
// + match, auto and typed auto, then --auto-reload-all when no auto annotation is set.
func (p *Policy) byAnnotations(r *Rules, c Candidate) (bool, Reason) {
	kind, name := c.ID.Kind, c.ID.Name
	switch {
	case p.IgnoredKinds[kind]:
		return false, ReasonKindIgnored
	case isTrue(c.Annotations[p.Keys.Ignore]):
		return false, ReasonSourceIgnored
	case r.Exclude[kind].Match(name):
		return false, ReasonExcluded
	case r.Named[kind].Match(name):
		return true, ReasonNamed
	case !c.Referenced:
		return false, ReasonNotReferenced
	case r.Search && isTrue(c.Annotations[p.Keys.Match]):
		return true, ReasonSearch
	case r.Auto != nil && *r.Auto:
		return true, ReasonAuto
	case r.TypedAuto[kind] != nil && *r.TypedAuto[kind]:
		return true, ReasonTypedAuto
	case r.Auto != nil && !*r.Auto:
		return false, ReasonOptedOut
	case p.AutoReloadAll && r.TypedAuto[kind] == nil:
		return true, ReasonAutoReloadAll
	}
	return false, ReasonNoRule
}

func isTrue(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "true") }
