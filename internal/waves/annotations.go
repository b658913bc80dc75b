package waves

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Bounds of the after annotation, checked before it is parsed.
const (
	MaxAfterBytes = 2048
	MaxAfter      = 32
)

// ParseAfter reads an after annotation: comma-separated <kind>/<name> references, such as
// "deployment/db, statefulset/cache". kind is lower-cased and checked by known (the kinds'
// names, short names included; it returns the kind's canonical name), name must be an object
// name. The valid references are returned, each once; each bad one is an error, and the rest
// still apply. A value past the bounds is refused whole.
func ParseAfter(v string, known func(kind string) (string, bool)) ([]Ref, []error) {
	if len(v) > MaxAfterBytes {
		return nil, []error{fmt.Errorf("annotation %s: %d bytes, more than %d; ignored", AfterAnnotation, len(v), MaxAfterBytes)}
	}
	if n := strings.Count(v, ",") + 1; n > MaxAfter {
		return nil, []error{fmt.Errorf("annotation %s: %d references, more than %d; ignored", AfterAnnotation, n, MaxAfter)}
	}
	var refs []Ref
	var errs []error
	for part := range strings.SplitSeq(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		kind, name, ok := strings.Cut(part, "/")
		if !ok || name == "" || strings.Contains(name, "/") {
			errs = append(errs, fmt.Errorf("annotation %s: %q is not <kind>/<name>, such as deployment/db; ignored", AfterAnnotation, part))
			continue
		}
		if problems := validation.IsDNS1123Subdomain(name); len(problems) > 0 {
			errs = append(errs, fmt.Errorf("annotation %s: %q is not an object name; ignored", AfterAnnotation, name))
			continue
		}
		canonical, ok := known(strings.ToLower(kind))
		if !ok {
			errs = append(errs, fmt.Errorf("annotation %s: unknown workload kind %q; ignored", AfterAnnotation, kind))
			continue
		}
		ref := Ref{Kind: canonical, Name: name}
		if !contains(refs, ref) {
			refs = append(refs, ref)
		}
	}
	return refs, errs
}

func contains(refs []Ref, r Ref) bool {
	for _, x := range refs {
		if x == r {
			return true
		}
	}
	return false
}

// IsTrue reads a boolean annotation ("true", "1", ...); anything else, absent included, is
// false.
func IsTrue(ann map[string]string, key string) bool {
	b, err := strconv.ParseBool(strings.TrimSpace(ann[key]))
	return err == nil && b
}
