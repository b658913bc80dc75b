package explain

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/lookup"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/workload"
)

// Planner answers, for `reloader plan`, what applying new content to ConfigMaps and Secrets
// of one namespace would roll, and when. It decides twice with the controller's own code:
// on the cluster as it is (live), and on the cluster as it would be with the proposed
// objects applied (next, through an overlay client). Nothing is written.
type Planner struct {
	live, next *Explainer
	namespace  string
	proposed   []client.Object
	// current are the live objects of the proposed ones, by source; nil when absent.
	current map[source.ID]client.Object
	now     time.Time
}

// NewPlanner returns a Planner of the proposed ConfigMaps and Secrets, all of namespace ns,
// deciding as a reloader started with conf would; keyNamespace is as for New.
func NewPlanner(ctx context.Context, cfg *rest.Config, conf options.Config, ns, keyNamespace string, proposed []client.Object) (*Planner, error) {
	live, err := New(ctx, cfg, conf, ns, keyNamespace)
	if err != nil {
		return nil, err
	}
	current := func(id source.ID, st sourcecache.SourceType) (client.Object, error) {
		cur := st.NewObject()
		switch err := live.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: id.Name}, cur); {
		case apierrors.IsNotFound(err):
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("get %s %s/%s: %w", id.Kind.Title(), ns, id.Name, err)
		}
		return cur, nil
	}
	return newPlanner(live, proposed, current, func(wrap func(client.Client) client.Client) (*Explainer, error) {
		return newExplainer(ctx, cfg, conf, ns, keyNamespace, wrap)
	})
}

// newPlanner plans proposed over live: current reads the live object of a proposed one (nil
// when absent), next builds the explainer of the cluster as it would be, reading through wrap.
func newPlanner(live *Explainer, proposed []client.Object, current func(source.ID, sourcecache.SourceType) (client.Object, error), next func(wrap func(client.Client) client.Client) (*Explainer, error)) (*Planner, error) {
	p := &Planner{live: live, namespace: live.namespace, current: map[source.ID]client.Object{}, now: live.now()}
	for _, obj := range proposed {
		id, err := p.idOf(obj)
		if err != nil {
			return nil, err
		}
		if _, dup := p.current[id]; dup {
			return nil, fmt.Errorf("%s is given twice", id)
		}
		st, ok := live.sourceType(id.Kind)
		if !ok {
			return nil, fmt.Errorf("%ss can't be read: %s", id.Kind.Title(), strings.Join(live.notes, "; "))
		}
		cur, err := current(id, st)
		if err != nil {
			return nil, err
		}
		p.current[id] = cur
		p.proposed = append(p.proposed, p.applied(obj, cur))
	}
	var err error
	p.next, err = next(func(c client.Client) client.Client {
		return newOverlay(c, p.proposed)
	})
	if err != nil {
		return nil, err
	}
	p.next.now = live.now
	return p, nil
}

func (p *Planner) idOf(obj client.Object) (source.ID, error) {
	var kind source.Kind
	switch obj.(type) {
	case *corev1.ConfigMap:
		kind = source.ConfigMap
	case *corev1.Secret:
		kind = source.Secret
	default:
		return source.ID{}, fmt.Errorf("%T: only ConfigMaps and Secrets can be planned", obj)
	}
	if ns := obj.GetNamespace(); ns != "" && ns != p.namespace {
		return source.ID{}, fmt.Errorf("%s/%s is in namespace %s, the plan is of %s: plan one namespace at a time", kind, obj.GetName(), ns, p.namespace)
	}
	if obj.GetName() == "" {
		return source.ID{}, fmt.Errorf("a %s without a name", kind.Title())
	}
	return source.ID{Kind: kind, Name: obj.GetName()}, nil
}

// applied is obj as the API server would store it over cur (nil: created): in the plan's
// namespace, a Secret's stringData merged into its data, the identity of the live object
// kept, and written now, so that the coalescing window counts from now.
func (p *Planner) applied(obj, cur client.Object) client.Object {
	out := obj.DeepCopyObject().(client.Object)
	out.SetNamespace(p.namespace)
	if s, ok := out.(*corev1.Secret); ok && len(s.StringData) > 0 {
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		for k, v := range s.StringData {
			s.Data[k] = []byte(v)
		}
		s.StringData = nil
	}
	if s, ok := out.(*corev1.Secret); ok && s.Type == "" {
		s.Type = corev1.SecretTypeOpaque
		if c, ok := cur.(*corev1.Secret); ok {
			s.Type = c.Type
		}
	}
	now := metav1.NewTime(p.now)
	out.SetCreationTimestamp(now)
	if cur != nil {
		out.SetUID(cur.GetUID())
		out.SetResourceVersion(cur.GetResourceVersion())
		out.SetCreationTimestamp(cur.GetCreationTimestamp())
	}
	out.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "reloader-plan", Operation: metav1.ManagedFieldsOperationUpdate, Time: &now}})
	return out
}

// Plan decides, for every workload of the namespace that references or names a proposed
// source, or that a change of one concerns, whether and when applying them rolls it.
func (p *Planner) Plan(ctx context.Context) (*Plan, error) {
	out := &Plan{APIVersion: PlanAPIVersion, Namespace: p.namespace, Now: p.now.UTC(), Workloads: []PlannedWorkload{}, Notes: slices.Clone(p.live.notes)}
	ids := slices.SortedFunc(maps.Keys(p.current), source.CompareIDs)
	changed := map[source.ID]bool{}
	for _, obj := range p.proposed {
		id, _ := p.idOf(obj)
		sc := p.sourceChange(id, obj)
		changed[id] = sc.Change != ChangeNone
		if sc.Change == ChangeUpdate && p.immutable(id) {
			out.Notes = append(out.Notes, fmt.Sprintf("%s %s is immutable: the API server refuses this change; delete and re-create it (planned here as the update it would be)", sc.Kind, sc.Name))
		}
		out.Sources = append(out.Sources, sc)
		if id.Kind == source.Secret && p.live.keyNote != "" && !slices.Contains(out.Notes, p.live.keyNote) {
			out.Notes = append(out.Notes, p.live.keyNote+"; whether a Secret changed is told from its content instead")
		}
	}
	slices.SortFunc(out.Sources, func(a, b SourceChange) int { return strings.Compare(a.Kind+"/"+a.Name, b.Kind+"/"+b.Name) })
	heard := p.heard(ctx, changed)
	for _, wk := range p.live.workloadKinds() {
		if p.live.ignoredKind(wk) != "" {
			continue
		}
		if err := p.live.client.List(ctx, wk.NewList(), client.InNamespace(p.namespace), client.Limit(1)); err != nil {
			if !apimeta.IsNoMatchError(err) {
				out.Notes = append(out.Notes, fmt.Sprintf("%ss not searched: %v", wk.Name(), err))
			}
			continue
		}
		found, err := p.candidates(ctx, wk, ids)
		if err != nil {
			return nil, err
		}
		for _, w := range found {
			pw, listed, err := p.workload(ctx, wk, w, ids, changed, heard)
			if err != nil {
				return nil, err
			}
			if listed {
				out.Workloads = append(out.Workloads, pw)
			}
		}
	}
	p.pace(out.Workloads)
	// Those that roll first, soonest first; then the others; by kind and name within.
	slices.SortStableFunc(out.Workloads, func(a, b PlannedWorkload) int {
		switch {
		case a.Rolls != b.Rolls && a.Rolls:
			return -1
		case a.Rolls != b.Rolls:
			return 1
		case a.Rolls && !a.At.Equal(*b.At):
			return a.At.Compare(*b.At)
		}
		return strings.Compare(a.Kind+"/"+a.Name, b.Kind+"/"+b.Name)
	})
	out.Summary = p.summary(out.Workloads)
	return out, nil
}

// candidates are the workloads of kind wk that reference or literally name one of the
// sources (the controller's source index), and those a change of one concerns as the
// controller finds them (patterns, ReloaderConfigs), before and after the change.
func (p *Planner) candidates(ctx context.Context, wk workload.Kind, ids []source.ID) ([]client.Object, error) {
	var out []client.Object
	seen := map[string]bool{}
	add := func(w client.Object) {
		if !seen[w.GetName()] {
			seen[w.GetName()] = true
			out = append(out, w)
		}
	}
	for _, id := range ids {
		list := wk.NewList()
		if err := p.live.client.List(ctx, list, client.InNamespace(p.namespace), client.MatchingFields{lookup.IndexSources: id.String()}); err != nil {
			return nil, fmt.Errorf("list %ss using %s: %w", wk.Name(), id, err)
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		for _, item := range items {
			add(item.(client.Object))
		}
		for _, e := range []*Explainer{p.live, p.next} {
			var annotations, labels map[string]string
			if o := e.sourceObject(ctx, id); o != nil {
				annotations, labels = o.GetAnnotations(), o.GetLabels()
			}
			for _, w := range e.lookup().Affected(ctx, wk, p.namespace, id, annotations, labels) {
				add(w)
			}
		}
	}
	slices.SortFunc(out, func(a, b client.Object) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out, nil
}

// sourceObject reads a source as e sees it; nil when absent or unreadable.
func (e *Explainer) sourceObject(ctx context.Context, id source.ID) client.Object {
	st, ok := e.sourceType(id.Kind)
	if !ok {
		return nil
	}
	o := st.NewObject()
	if err := e.client.Get(ctx, client.ObjectKey{Namespace: e.namespace, Name: id.Name}, o); err != nil {
		return nil
	}
	return o
}
