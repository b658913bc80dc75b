package reload

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/reloader-operator/reloader/internal/source"
)

// Rules are a workload's reload annotations, parsed.
type Rules struct {
	// Auto is nil when the auto annotation is absent.
	Auto      *bool
	TypedAuto map[source.Kind]*bool
	// Named are the entries of the reload annotations; nil for a kind without entries.
	Named map[source.Kind]*Names
	// Literal are the named entries that are plain names, not patterns: they concern the
	// workload even before the source exists, so its creation can be noticed.
	Literal map[source.Kind][]string
	// Exclude are the exclude lists: exact names, as upstream matches them.
	Exclude map[source.Kind]*Names
	Search  bool
	// Configs are the source rules of the ReloaderConfigs that target the workload.
	Configs []ConfigRule
	// UsedKeysOnly and KeyLists restrict sources to some of their keys (see KeysOf).
	UsedKeysOnly bool
	KeyLists     map[source.Kind]*KeyList
}

// HasNamed reports whether the workload names sources of this kind (it may not reference them).
func (r *Rules) HasNamed(kind source.Kind) bool { return !r.Named[kind].Empty() }

// HasPatterns reports whether some named entry of this kind is a pattern, so that any source
// of the kind may match it; literal names alone can be looked up one by one.
func (r *Rules) HasPatterns(kind source.Kind) bool { return r.Named[kind].Patterns() > 0 }

// Opted reports whether the workload carries any reload annotation, or is a target of a
// ReloaderConfig.
func (r *Rules) Opted() bool {
	if r.Auto != nil || r.Search || len(r.Configs) > 0 {
		return true
	}
	for _, k := range source.Kinds {
		if r.TypedAuto[k] != nil || r.HasNamed(k) {
			return true
		}
	}
	return false
}

// ParseRules reads the rules from a workload's metadata annotations, falling back key by key
// to its pod-template annotations. Bad values are skipped and returned as errors, so one typo
// never disables the rest of a workload's rules. It memoizes nothing: the reconcilers parse
// through their Policy's Caches.
func ParseRules(keys Keys, meta, template map[string]string) (Rules, []error) {
	return (*Caches)(nil).ParseRules(keys, meta, template)
}

// ParseRules is the package's ParseRules, with name and key lists parsed once per distinct
// value while c keeps them, so thousands of workloads sharing an annotation cost one parse.
func (c *Caches) ParseRules(keys Keys, meta, template map[string]string) (Rules, []error) {
	lookup := lookupIn(meta, template)
	var errs []error
	boolean := func(key string) *bool {
		v, ok := lookup(key)
		if !ok {
			return nil
		}
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			errs = append(errs, fmt.Errorf("annotation %s: %q is not true or false", key, clip(v)))
			return nil
		}
		return &b
	}
	names := func(key string, patterns bool) *Names {
		v, ok := lookup(key)
		if !ok {
			return nil
		}
		n := c.names(v, patterns)
		for _, err := range n.errs {
			errs = append(errs, fmt.Errorf("annotation %s: %w", key, err))
		}
		return n
	}

	keyList := func(key string) *KeyList {
		v, ok := lookup(key)
		if !ok {
			return nil
		}
		l := c.keyList(v)
		for _, err := range l.errs {
			errs = append(errs, fmt.Errorf("annotation %s: %w", key, err))
		}
		return l
	}

	r := Rules{
		Auto:      boolean(keys.Auto),
		TypedAuto: map[source.Kind]*bool{},
		Named:     map[source.Kind]*Names{},
		Literal:   map[source.Kind][]string{},
		Exclude:   map[source.Kind]*Names{},
		KeyLists:  map[source.Kind]*KeyList{},
	}
	if s := boolean(keys.Search); s != nil {
		r.Search = *s
	}
	if u := boolean(UsedKeysOnlyAnnotation); u != nil {
		r.UsedKeysOnly = *u
	}
	for k, key := range keysAnnotations {
		r.KeyLists[k] = keyList(key)
	}
	for _, k := range source.Kinds {
		r.TypedAuto[k] = boolean(keys.TypedAuto[k])
		r.Named[k] = names(keys.Reload[k], true)
		r.Literal[k] = r.Named[k].Literals()
		r.Exclude[k] = names(keys.Exclude[k], false)
	}
	return r, errs
}

// Named is what the source index needs of a workload's reload annotations, read without
// compiling anything: it runs under the informer's lock, on every workload write.
type Named struct {
	// Literal are the names given as plain names.
	Literal []string
	// Patterns is true when some entry is a pattern, so that any name may match.
	Patterns bool
}

// ScanNamed reads the reload annotations of a workload for the source index. It applies the
// same limits as ParseRules and compiles no regular expression.
func ScanNamed(keys Keys, meta, template map[string]string) map[source.Kind]Named {
	lookup := lookupIn(meta, template)
	out := map[source.Kind]Named{}
	for _, k := range source.Kinds {
		v, ok := lookup(keys.Reload[k])
		if !ok {
			continue
		}
		e := split(v, true)
		if len(e.literals) > 0 || len(e.patterns) > 0 {
			out[k] = Named{Literal: e.literals, Patterns: len(e.patterns) > 0}
		}
	}
	return out
}

func lookupIn(meta, template map[string]string) func(string) (string, bool) {
	return func(key string) (string, bool) {
		if v, ok := meta[key]; ok {
			return v, true
		}
		v, ok := template[key]
		return v, ok
	}
}
