package options

import (
	"encoding/csv"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
)

// selectorFlag is --namespace-selector and --resource-label-selector. Upstream declares them
// as string lists, so its chart's --namespace-selector="env=test" (quotes included in the
// argument) works, and so does repeating the flag: each value is read as CSV, which strips
// the quotes, and the terms of every value are joined with commas. A set expression split at
// its comma by the CSV reading ("env in (a", "b)") is whole again once joined.
type selectorFlag struct {
	s       *string
	changed bool
}

func (f *selectorFlag) String() string { return *f.s }
func (f *selectorFlag) Type() string   { return "selector" }

func (f *selectorFlag) Set(v string) error {
	r := csv.NewReader(strings.NewReader(v))
	r.TrimLeadingSpace = true
	fields, err := r.Read()
	if err != nil && v != "" {
		return fmt.Errorf("%q: %w", v, err)
	}
	var terms []string
	if f.changed && *f.s != "" {
		terms = append(terms, *f.s)
	}
	for _, field := range fields {
		if field = strings.TrimSpace(field); field != "" {
			terms = append(terms, field)
		}
	}
	*f.s = strings.Join(terms, ",")
	f.changed = true
	return nil
}

// ParseSelector reads a label selector in Kubernetes syntax or in upstream's forms, term by
// term: "key:value" is key=value, "key:*" and "key=*" mean the key is set, and "*" alone
// selects everything. An empty selector is nil.
func ParseSelector(s string) (labels.Selector, error) {
	var terms []string
	everything := false
	for _, term := range splitTerms(s) {
		switch {
		case term == "*":
			everything = true
		case strings.ContainsAny(term, "!() "):
			terms = append(terms, term)
		case strings.HasSuffix(term, "=*") && !strings.Contains(strings.TrimSuffix(term, "=*"), "="):
			terms = append(terms, strings.TrimSuffix(term, "=*"))
		case strings.Contains(term, "="):
			terms = append(terms, term)
		default:
			key, value, found := strings.Cut(term, ":")
			if found && value != "*" {
				key += "=" + value
			}
			terms = append(terms, key)
		}
	}
	if len(terms) == 0 {
		if everything {
			return labels.Everything(), nil
		}
		return nil, nil
	}
	return labels.Parse(strings.Join(terms, ","))
}

// splitTerms splits a selector at the commas that are not inside a set's parentheses, and
// drops empty terms.
func splitTerms(s string) []string {
	var terms []string
	depth, start := 0, 0
	flush := func(end int) {
		if t := strings.TrimSpace(s[start:end]); t != "" {
			terms = append(terms, t)
		}
		start = end + 1
	}
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth <= 0 {
				flush(i)
			}
		}
	}
	flush(len(s))
	return terms
}
