package reload

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/reloader-operator/reloader/internal/source"
)

// Rules are a workload's reload annotations, parsed.
type Rules struct {
	// Auto is nil when the auto annotation is absent.
	Auto      *bool
	TypedAuto map[source.Kind]*bool
	Named     map[source.Kind][]*regexp.Regexp
	// Literal are the named entries that are plain names, not patterns: they concern the
	// workload even before the source exists, so its creation can be noticed.
	Literal map[source.Kind][]string
	Exclude map[source.Kind][]*regexp.Regexp
	Search  bool
}

// HasNamed reports whether the workload names sources of this kind (it may not reference them).
func (r *Rules) HasNamed(kind source.Kind) bool { return len(r.Named[kind]) > 0 }

// Opted reports whether the workload carries any reload annotation at all.
func (r *Rules) Opted() bool {
	if r.Auto != nil || r.Search {
		return true
	}
	for _, k := range source.Kinds {
		if r.TypedAuto[k] != nil || len(r.Named[k]) > 0 {
			return true
		}
	}
	return false
}

// ParseRules reads the rules from a workload's metadata annotations, falling back key by key
// to its pod-template annotations. Bad values are skipped and returned as errors, so one typo
// never disables the rest of a workload's rules.
func ParseRules(keys Keys, meta, template map[string]string) (Rules, []error) {
	lookup := func(key string) (string, bool) {
		if v, ok := meta[key]; ok {
			return v, true
		}
		v, ok := template[key]
		return v, ok
	}
	var errs []error
	boolean := func(key string) *bool {
		v, ok := lookup(key)
		if !ok {
			return nil
		}
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			errs = append(errs, fmt.Errorf("annotation %s: %q is not true or false", key, v))
			return nil
		}
		return &b
	}
	patterns := func(key string, literals *[]string) []*regexp.Regexp {
		v, ok := lookup(key)
		if !ok {
			return nil
		}
		var res []*regexp.Regexp
		for _, entry := range strings.Split(v, ",") {
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			re, err := regexp.Compile("^(?:" + entry + ")$")
			if err != nil {
				errs = append(errs, fmt.Errorf("annotation %s: entry %q is not a valid regular expression: %w", key, entry, err))
				continue
			}
			res = append(res, re)
			if literals != nil && regexp.QuoteMeta(entry) == entry {
				*literals = append(*literals, entry)
			}
		}
		return res
	}

	r := Rules{
		Auto:      boolean(keys.Auto),
		TypedAuto: map[source.Kind]*bool{},
		Named:     map[source.Kind][]*regexp.Regexp{},
		Literal:   map[source.Kind][]string{},
		Exclude:   map[source.Kind][]*regexp.Regexp{},
	}
	if s := boolean(keys.Search); s != nil {
		r.Search = *s
	}
	for _, k := range source.Kinds {
		r.TypedAuto[k] = boolean(keys.TypedAuto[k])
		var literals []string
		r.Named[k] = patterns(keys.Reload[k], &literals)
		r.Literal[k] = literals
		r.Exclude[k] = patterns(keys.Exclude[k], nil)
	}
	return r, errs
}
