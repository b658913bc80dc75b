package reloaderconfig

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/reloader-operator/reloader/api/v1alpha1"
)

// MaxGenericTargets bounds spec.genericTargets, as the CRD does.
const MaxGenericTargets = 16

// GenericTarget is one compiled generic target: an object of any kind with a pod template
// at Path (field names, outermost first).
type GenericTarget struct {
	GVK  schema.GroupVersionKind
	Name string
	Path []string
	// OwnerOf, when set in place of Name, is the workload (apps/v1) whose top-level
	// controller owner is the target.
	OwnerOf *schema.GroupVersionKind
	// OwnerOfName names that workload.
	OwnerOfName string
}

// Describe names the target for messages: "Grafana grafana" or "Grafana owning Deployment web".
func (g GenericTarget) Describe() string {
	if g.OwnerOf != nil {
		return g.GVK.Kind + " owning " + g.OwnerOf.Kind + " " + g.OwnerOfName
	}
	return g.GVK.Kind + " " + g.Name
}

// namePattern is a pattern and a length: a bounded repeat such as `x{0,251}` compiles into
// that many copies of x (these three held 270 KB from start to exit).
type namePattern struct {
	re  *regexp.Regexp
	max int
}

// MatchString reports whether s has at most max bytes and matches the pattern.
func (p namePattern) MatchString(s string) bool { return len(s) <= p.max && p.re.MatchString(s) }

var (
	fieldName  = namePattern{regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`), 63}
	kindName   = namePattern{regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`), 63}
	objectName = namePattern{regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`), 253}
)

// ParseTemplatePath splits a dotted templatePath into its field names, holding it to the
// CRD's bounds again (a config stored under an older CRD never met them).
func ParseTemplatePath(p string) ([]string, error) {
	if p == "" || len(p) > v1alpha1.MaxTemplatePathLength {
		return nil, fmt.Errorf("templatePath must have 1 to %d characters", v1alpha1.MaxTemplatePathLength)
	}
	segs := strings.Split(p, ".")
	if len(segs) > v1alpha1.MaxTemplatePathSegments {
		return nil, fmt.Errorf("templatePath %q has %d field names, at most %d", p, len(segs), v1alpha1.MaxTemplatePathSegments)
	}
	for _, s := range segs {
		if !fieldName.MatchString(s) {
			return nil, fmt.Errorf("templatePath %q: %q is not a field name (letters, digits, _; at most 63)", p, s)
		}
	}
	return segs, nil
}

// compileGeneric reads one generic target; an error names what to fix.
func compileGeneric(t v1alpha1.GenericTarget) (GenericTarget, error) {
	gv, err := schema.ParseGroupVersion(t.APIVersion)
	if err != nil || gv.Version == "" || len(t.APIVersion) > 253 {
		return GenericTarget{}, fmt.Errorf("apiVersion %q is not group/version", t.APIVersion)
	}
	if !kindName.MatchString(t.Kind) {
		return GenericTarget{}, fmt.Errorf("kind %q is not a kind name", t.Kind)
	}
	path, err := ParseTemplatePath(t.TemplatePath)
	if err != nil {
		return GenericTarget{}, err
	}
	g := GenericTarget{GVK: gv.WithKind(t.Kind), Path: path}
	switch {
	case t.OwnerOf != nil && t.Name == "":
		switch t.OwnerOf.Kind {
		case "Deployment", "StatefulSet", "DaemonSet":
		default:
			return GenericTarget{}, fmt.Errorf("ownerOf.kind %q is none of Deployment, StatefulSet, DaemonSet", t.OwnerOf.Kind)
		}
		if !objectName.MatchString(t.OwnerOf.Name) {
			return GenericTarget{}, fmt.Errorf("ownerOf.name %q is not an object name", t.OwnerOf.Name)
		}
		g.OwnerOf, g.OwnerOfName = &schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: t.OwnerOf.Kind}, t.OwnerOf.Name
	case t.OwnerOf == nil && objectName.MatchString(t.Name):
		g.Name = t.Name
	default:
		return GenericTarget{}, fmt.Errorf("needs exactly one of name (an object name, not %q) and ownerOf", t.Name)
	}
	return g, nil
}
