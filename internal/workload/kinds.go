package workload

import (
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Description is what reloader knows of a kind besides its objects, written once, in the
// kind's own file: the values --ignored-workload-types accepts, the RBAC rules reloader needs
// (internal/rbac, and through it the chart's), the names `reloader explain` and `plan` accept
// and the kinds the manager watches (internal/app) are all derived from it. What the kind can
// do beyond its pod template is the capability interfaces its adapter implements
// (Capabilities).
type Description struct {
	// Resource is the kind's API group, version and plural resource name.
	Resource schema.GroupVersionResource
	// Short are kubectl's short names, such as "deploy".
	Short []string
	// Gate makes the kind optional; Always for the kinds every cluster serves.
	Gate Gate
}

// Gate is what decides whether reloader reconciles an optional kind.
type Gate uint8

const (
	// Always: every cluster serves the kind; reconciled unless --ignored-workload-types
	// names it.
	Always Gate = iota
	// ArgoRollouts: reconciled with --is-Argo-Rollouts, when the cluster serves the API.
	ArgoRollouts
	// OpenShift: reconciled when the cluster serves the API, unless --is-openshift=false.
	OpenShift
)

// Known returns every kind reloader knows, whether or not a cluster serves it, in a stable
// order: the built-in kinds first. Adding a kind is its file (an adapter whose Describe says
// the rest) and one line here.
func Known() Catalog {
	return Catalog{Deployment(), StatefulSet(), DaemonSet(), CronJob(), Job(), Rollout(), DeploymentConfig()}
}

// Builtin returns the kinds every cluster has, in a stable order.
func Builtin() []Kind {
	return Known().Gated(Always)
}

// Catalog is a list of kinds, each described once.
type Catalog []Kind

// With returns the catalog with kinds added (a kind of a test, say).
func (c Catalog) With(kinds ...Kind) Catalog { return append(slices.Clip(c), kinds...) }

// Gated returns the kinds behind gate g.
func (c Catalog) Gated(g Gate) []Kind {
	var out []Kind
	for _, k := range c {
		if k.Describe().Gate == g {
			out = append(out, k)
		}
	}
	return out
}

// Plurals are the lower-case plural names of the kinds (their resources), in the order
// --ignored-workload-types has always listed them: as Known, but DaemonSets before
// StatefulSets.
func (c Catalog) Plurals() []string {
	out := make([]string, 0, len(c))
	for _, k := range c {
		out = append(out, k.Describe().Resource.Resource)
	}
	if i, j := slices.Index(out, "statefulsets"), slices.Index(out, "daemonsets"); i >= 0 && j == i+1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// ByPlural returns the kind whose plural name is p (lower case).
func (c Catalog) ByPlural(p string) (Kind, bool) {
	for _, k := range c {
		if k.Describe().Resource.Resource == p {
			return k, true
		}
	}
	return nil, false
}

// Lookup returns the kind a user's name stands for, as kubectl reads it: any case, singular,
// plural or short name ("Deployments", "deploy").
func (c Catalog) Lookup(name string) (Kind, bool) {
	name = strings.ToLower(name)
	for _, k := range c {
		if slices.Contains(Names(k), name) {
			return k, true
		}
	}
	return nil, false
}

// ByName returns the kind named name ("Deployment").
func (c Catalog) ByName(name string) (Kind, bool) {
	i := slices.IndexFunc(c, func(k Kind) bool { return k.Name() == name })
	if i < 0 {
		return nil, false
	}
	return c[i], true
}

// Read returns the kinds whose objects are read when reconciled are: reconciled, and the
// kinds whose templates they may run (a Rollout's workloadRef names a Deployment, read and
// patched even when Deployments themselves are left alone).
func (c Catalog) Read(reconciled []Kind) []Kind {
	read := slices.Clone(reconciled)
	for _, k := range reconciled {
		ref, ok := k.(Referencing)
		if !ok {
			continue
		}
		target, known := c.ByName(ref.References())
		if known && !slices.ContainsFunc(read, func(r Kind) bool { return r.Name() == target.Name() }) {
			read = append(read, target)
		}
	}
	return read
}

// RunsAs returns the kind of the objects a Scheduled kind starts (RunNow): a CronJob's Jobs.
func (c Catalog) RunsAs(k Kind) (Kind, bool) {
	s, ok := k.(Scheduled)
	if !ok {
		return nil, false
	}
	run := s.RunNow(k.NewObject(), "probe")
	for _, other := range c {
		if sameType(other.NewObject(), run) {
			return other, true
		}
	}
	return nil, false
}

// Names are the names users type for k, lower case: singular, plural, then short names.
func Names(k Kind) []string {
	d := k.Describe()
	return append([]string{strings.ToLower(k.Name()), d.Resource.Resource}, d.Short...)
}

// GVK is k's group, version and kind.
func GVK(k Kind) schema.GroupVersionKind {
	return k.Describe().Resource.GroupVersion().WithKind(k.Name())
}

// Verbs are the verbs reloader needs on k's objects when it reconciles them: read and watch
// them; with writes, patch them (every reload, and the record of a first sight, is a patch),
// and delete and create them again where a reload replaces the object (Recreated).
func Verbs(k Kind, writes bool) []string {
	verbs := []string{"get", "list", "watch"}
	if !writes {
		return verbs
	}
	verbs = append(verbs, "patch")
	if _, ok := k.(Recreated); ok {
		verbs = append(verbs, "create", "delete")
	}
	return verbs
}

// Capabilities name what k can do beyond a pod template change, from the interfaces its
// adapter implements: pause, restart, evict, run-now, recreate, reference, progress.
func Capabilities(k Kind) []string {
	var out []string
	add := func(name string, ok bool) {
		if ok {
			out = append(out, name)
		}
	}
	_, pause := k.(Pausable)
	_, restart := k.(Restartable)
	_, evict := k.(Evictable)
	_, runNow := k.(Scheduled)
	_, recreate := k.(Recreated)
	_, ref := k.(Referencing)
	_, progress := k.(Progressing)
	add("pause", pause)
	add("restart", restart)
	add("evict", evict)
	add("run-now", runNow)
	add("recreate", recreate)
	add("reference", ref)
	add("progress", progress)
	return out
}

func sameType(a, b any) bool { return reflect.TypeOf(a) == reflect.TypeOf(b) }
