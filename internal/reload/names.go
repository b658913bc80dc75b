package reload

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Limits of one reload or exclude annotation value. Anyone who can write a workload can set
// it, and reloader reads it on every event, so its cost must be bounded whatever it holds.
// Real values name a few sources; these leave room for hundreds.
const (
	// MaxValueBytes bounds a whole value; a longer one is ignored as a whole.
	MaxValueBytes = 16 << 10
	// MaxEntries bounds the comma-separated entries of a value; a value with more is ignored
	// as a whole.
	MaxEntries = 256
	// MaxPatternLength bounds one entry that is not an object name (object names are at
	// most 253 characters); a longer entry is ignored.
	MaxPatternLength = 256
	// MaxPatterns bounds the entries of a value that are patterns; the rest are ignored.
	MaxPatterns = 32
	// MaxPatternSize bounds the compiled size of all patterns of a value, in regular
	// expression instructions (about 40 bytes each); patterns past it are ignored. A counted
	// repetition such as x{1000} costs its count times its operand.
	MaxPatternSize = 2048
	// maxReported bounds the errors reported for one value, so that the Event stays short.
	maxReported = 3
)

// Names is one parsed name list: a reload annotation (names and patterns) or an exclude
// annotation (names only). It is shared between workloads and never modified.
type Names struct {
	literals []string
	exact    map[string]bool
	patterns []*regexp.Regexp
	errs     []error
	// cost estimates the bytes it holds, for the cache.
	cost int
}

// Match reports whether name is one of the names, or matches one of the patterns.
func (n *Names) Match(name string) bool {
	if n == nil {
		return false
	}
	if n.exact[name] {
		return true
	}
	for _, re := range n.patterns {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

func (n *Names) size() int { return n.cost }

// Empty reports whether the list holds nothing that can match.
func (n *Names) Empty() bool { return n == nil || len(n.literals)+len(n.patterns) == 0 }

// Literals returns the plain names of the list, sorted. The caller must not modify them.
func (n *Names) Literals() []string {
	if n == nil {
		return nil
	}
	return n.literals
}

// Patterns returns how many entries are patterns.
func (n *Names) Patterns() int {
	if n == nil {
		return 0
	}
	return len(n.patterns)
}

// entries is a value split into its valid entries, nothing compiled yet.
type entries struct {
	literals []string
	patterns []string
	errs     []error
}

// split cuts a value into entries within the limits. An entry that is a valid object name
// is a literal: "app.config" names that object only, it is no pattern that also matches
// "app-config". Other entries are patterns when allowed, errors otherwise.
func split(v string, allowPatterns bool) entries {
	var e entries
	if len(v) > MaxValueBytes {
		e.errs = append(e.errs, fmt.Errorf("value is %d bytes, over the limit of %d; the whole annotation is ignored", len(v), MaxValueBytes))
		return e
	}
	if n := countEntries(v); n > MaxEntries {
		e.errs = append(e.errs, fmt.Errorf("value has %d entries, over the limit of %d; the whole annotation is ignored", n, MaxEntries))
		return e
	}
	rejected := 0
	reject := func(err error) {
		if rejected++; rejected <= maxReported {
			e.errs = append(e.errs, err)
		}
	}
	for entry := range strings.SplitSeq(v, ",") {
		entry = strings.TrimSpace(entry)
		switch {
		case entry == "":
		case len(validation.IsDNS1123Subdomain(entry)) == 0:
			e.literals = append(e.literals, entry)
		case !allowPatterns:
			reject(fmt.Errorf("entry %q is not an object name; exclude lists hold exact names", clip(entry)))
		case len(entry) > MaxPatternLength:
			reject(fmt.Errorf("entry %q is %d characters, over the limit of %d for a pattern", clip(entry), len(entry), MaxPatternLength))
		default:
			e.patterns = append(e.patterns, entry)
		}
	}
	if rejected > maxReported {
		e.errs = append(e.errs, fmt.Errorf("and %d more entries rejected", rejected-maxReported))
	}
	slices.Sort(e.literals)
	e.literals = slices.Compact(e.literals)
	return e
}

func countEntries(v string) int {
	n := 0
	for entry := range strings.SplitSeq(v, ",") {
		if strings.TrimSpace(entry) != "" {
			n++
		}
	}
	return n
}

// parseNames parses one value; compiled caches its results.
func parseNames(v string, allowPatterns bool) *Names {
	e := split(v, allowPatterns)
	n := &Names{literals: e.literals, errs: e.errs, cost: 2*len(v) + 64}
	if len(e.literals) > 0 {
		n.exact = make(map[string]bool, len(e.literals))
		for _, l := range e.literals {
			n.exact[l] = true
		}
	}
	budget := MaxPatternSize
	rejected := 0
	for i, p := range e.patterns {
		if budget <= 0 || i == MaxPatterns {
			// Nothing more fits: reject the rest unparsed.
			n.errs = append(n.errs, fmt.Errorf("%d more patterns ignored: a value holds at most %d patterns, of %d instructions in all", len(e.patterns)-i, MaxPatterns, MaxPatternSize))
			break
		}
		re, size, err := compilePattern(p, budget)
		if err != nil {
			if rejected++; rejected <= maxReported {
				n.errs = append(n.errs, err)
			}
			continue
		}
		budget -= size
		n.cost += 64 * size
		n.patterns = append(n.patterns, re)
	}
	if rejected > maxReported {
		n.errs = append(n.errs, fmt.Errorf("and %d more patterns rejected", rejected-maxReported))
	}
	return n
}

var errTooComplex = errors.New("too complex")

// compilePattern compiles an anchored pattern if its estimated size fits the budget. The size
// is estimated from the parse tree first: compiling is what costs, and it is linear in that
// size, while parsing is linear in the pattern's length.
func compilePattern(p string, budget int) (*regexp.Regexp, int, error) {
	tree, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return nil, 0, fmt.Errorf("entry %q is not a valid regular expression: %w", clip(p), err)
	}
	size := progSize(tree, budget+1)
	if size > budget {
		return nil, 0, fmt.Errorf("entry %q: pattern %w: the patterns of one annotation may compile to at most %d instructions", clip(p), errTooComplex, MaxPatternSize)
	}
	re, err := regexp.Compile("^(?:" + p + ")$")
	if err != nil {
		return nil, 0, fmt.Errorf("entry %q is not a valid regular expression: %w", clip(p), err)
	}
	return re, size, nil
}

// progSize estimates the instructions a parse tree compiles to, stopping at limit.
func progSize(re *syntax.Regexp, limit int) int {
	n := 1
	switch re.Op {
	case syntax.OpLiteral:
		n = len(re.Rune)
	case syntax.OpCharClass:
		n = 1 + len(re.Rune)/2
	}
	var sub int
	for _, s := range re.Sub {
		sub += progSize(s, limit)
		if sub >= limit {
			return limit
		}
	}
	if re.Op == syntax.OpRepeat {
		count := max(re.Max, re.Min+1, 1)
		if sub > 0 && count > limit/sub {
			return limit
		}
		sub *= count
	}
	return min(n+sub, limit)
}

// clip shortens what an error quotes of a value.
func clip(s string) string {
	const keep = 64
	if len(s) <= keep {
		return s
	}
	return s[:keep] + "..."
}
