package lookup

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/workload"
)

// A tenant's namespace: 20 ReloaderConfigs choosing every ConfigMap, each with 64 targets
// choosing every Deployment, and 200 Deployments using ConfigMap cfg. Mapping a change of
// cfg once weighed every config's every target for every workload, for every config that
// found it again (7.85 s for one event): an ignored cfg weighs none, and a plain one weighs
// one target per workload, the only distinct one.
func TestMappingASourceEventWeighsEachDistinctTargetOncePerWorkload(t *testing.T) {
	const ns, configs, targets, deployments = "tenant", 20, 64, 200
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	kind, keys := workload.Deployment(), reload.DefaultKeys()
	var objs []client.Object
	for i := range configs {
		cfg := &v1alpha1.ReloaderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cfg-%02d", i),
			UID: types.UID(fmt.Sprint("uid-", i)), Generation: 1}}
		cfg.Spec.Sources = []v1alpha1.Source{{Kind: "ConfigMap", All: true}}
		for range targets {
			cfg.Spec.Targets = append(cfg.Spec.Targets, v1alpha1.Target{Kind: "Deployment", All: true})
		}
		objs = append(objs, cfg)
	}
	for i := range deployments {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("web-%03d", i)}}
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", EnvFrom: []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}}
		objs = append(objs, d)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithIndex(&appsv1.Deployment{}, IndexSources, sourceIndexer(kind, keys)).Build()
	var weighed atomic.Int64
	l := Lookup{Client: c, Policy: reload.Policy{Keys: keys}, Configs: &reloaderconfig.Cache{}, Weighed: &weighed}
	id := source.ID{Kind: source.ConfigMap, Name: "cfg"}

	for _, tc := range []struct {
		name        string
		annotations map[string]string
		policy      reload.Policy
		found       int
		maxWeighed  int64
	}{
		{"ignore annotation", map[string]string{keys.Ignore: "true"}, reload.Policy{Keys: keys}, 0, 0},
		{"ignore annotation, any case", map[string]string{keys.Ignore: " True"}, reload.Policy{Keys: keys}, 0, 0},
		{"ignored kind", nil, reload.Policy{Keys: keys, IgnoredKinds: map[source.Kind]bool{source.ConfigMap: true}}, 0, 0},
		{"ignore annotation false", map[string]string{keys.Ignore: "false"}, reload.Policy{Keys: keys}, deployments, deployments},
		{"not ignored", nil, reload.Policy{Keys: keys}, deployments, deployments},
	} {
		t.Run(tc.name, func(t *testing.T) {
			weighed.Store(0)
			l.Policy = tc.policy
			found := 0
			scanned, failed := l.FindAffected(context.Background(), kind, ns, id, tc.annotations, nil, func(client.Object) { found++ })
			if failed != nil {
				t.Fatal(failed)
			}
			if found != tc.found {
				t.Errorf("%d Deployments concerned, want %d", found, tc.found)
			}
			if tc.found == 0 && scanned != 0 {
				t.Errorf("%d Deployments looked at for an ignored source, want none", scanned)
			}
			// Before: every config's every target for each workload, again for each of the
			// configs finding it: configs*targets*deployments*(configs+1) weighings.
			if got := weighed.Load(); got > tc.maxWeighed || (tc.maxWeighed > 0 && got == 0) {
				t.Errorf("%d targets weighed, want at most %d (and some when any is concerned)", got, tc.maxWeighed)
			}
		})
	}

	// The baselines look among the workloads without record: the rules of the others are not
	// weighed.
	weighed.Store(0)
	l.Policy = reload.Policy{Keys: keys}
	found := 0
	keep := func(w client.Object) bool { return w.GetName() < "web-010" }
	if _, failed := l.FindAffectedOf(context.Background(), kind, ns, id, nil, nil, keep, func(client.Object) { found++ }); failed != nil {
		t.Fatal(failed)
	}
	if found != 10 {
		t.Errorf("%d Deployments kept and concerned, want 10", found)
	}
	if got := weighed.Load(); got == 0 || got > 10 {
		t.Errorf("%d targets weighed, want 10 at most: those of the workloads kept", got)
	}
}

// A config's targets: the distinct ones weighed once, a workload targeted through any of
// them, after lists from each matching target, in order.
func TestTargetPlanMatchesTheConfigsTargets(t *testing.T) {
	kind := workload.Deployment()
	web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web", Labels: map[string]string{"tier": "front"}}}
	cfg := func(name string, targets ...v1alpha1.Target) *reloaderconfig.Compiled {
		c := &v1alpha1.ReloaderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name}}
		c.Spec.Targets = targets
		c.Spec.Sources = []v1alpha1.Source{{Kind: "ConfigMap", Name: name}}
		return reloaderconfig.Compile(c)
	}
	front := &v1alpha1.LabelSelector{MatchLabels: map[string]string{"tier": "front"}}
	back := &v1alpha1.LabelSelector{MatchLabels: map[string]string{"tier": "back"}}
	configs := []*reloaderconfig.Compiled{
		cfg("by-name", v1alpha1.Target{Kind: "Deployment", Name: "web", After: []string{"deployment/db"}}),
		cfg("by-label", v1alpha1.Target{Kind: "Deployment", Selector: back}, v1alpha1.Target{Kind: "Deployment", Selector: front, After: []string{"deployment/cache"}}),
		cfg("other", v1alpha1.Target{Kind: "Deployment", Selector: back}, v1alpha1.Target{Kind: "Deployment", Name: "api"}),
		cfg("statefulsets", v1alpha1.Target{Kind: "StatefulSet", All: true}),
		cfg("repeats", v1alpha1.Target{Kind: "Deployment", Selector: front}, v1alpha1.Target{Kind: "Deployment", Selector: front}),
	}
	var weighed atomic.Int64
	m := Lookup{Weighed: &weighed}.Targeting(context.Background(), kind, configs, web)
	var chose []string
	for _, r := range m.Rules {
		chose = append(chose, r.Config)
	}
	if fmt.Sprint(chose) != "[by-label by-name repeats]" {
		t.Errorf("rules of %v, want by-label, by-name and repeats", chose)
	}
	if fmt.Sprint(m.Overrides.After) != "[deployment/db deployment/cache]" {
		t.Errorf("after %v, want deployment/db then deployment/cache", m.Overrides.After)
	}
	// Distinct Deployment targets: name web, tier=back, tier=front, name api.
	if got := weighed.Load(); got != 4 {
		t.Errorf("%d targets weighed, want the 4 distinct ones once", got)
	}
}

// inPlace answers lookups by index in place, as nsindex.Reading does, by a List of its own
// client (so that the answers are the List's), and counts them; it has no index of kinds
// but Deployments.
type inPlace struct {
	client.Client
	answered int
}

func (c *inPlace) Each(list client.ObjectList, ns, field, value string, fn func(client.Object)) bool {
	if _, ok := list.(*appsv1.DeploymentList); !ok {
		return false
	}
	l := &appsv1.DeploymentList{}
	if err := c.List(context.Background(), l, client.InNamespace(ns), client.MatchingFields{field: value}); err != nil {
		return false
	}
	c.answered++
	for i := range l.Items {
		fn(&l.Items[i])
	}
	return true
}

func (c *inPlace) EachIn(client.ObjectList, string, func(client.Object)) bool { return false }

// A client that reads its indexes in place answers the lookups by source, and they find what
// the List finds.
func TestLookupsReadTheIndexInPlaceWhereTheClientCan(t *testing.T) {
	kind, keys := workload.Deployment(), reload.DefaultKeys()
	var objs []client.Object
	for i := range 5 {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("web-%d", i),
			Annotations: map[string]string{keys.Auto: "true"}}}
		cm := "cfg"
		if i%2 == 1 {
			cm = "other"
		}
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", EnvFrom: []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}}}}
		objs = append(objs, d)
	}
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(objs...).
		WithIndex(&appsv1.Deployment{}, IndexSources, sourceIndexer(kind, keys)).Build()
	id := source.ID{Kind: source.ConfigMap, Name: "cfg"}
	find := func(r client.Reader) []string {
		got := []string{}
		for _, w := range (Lookup{Client: r, Policy: reload.Policy{Keys: keys}}).Affected(context.Background(), kind, "ns", id, nil, nil) {
			got = append(got, w.GetName())
		}
		return got
	}
	in := &inPlace{Client: c}
	listed, read := find(c), find(in)
	if fmt.Sprint(listed) != "[web-0 web-2 web-4]" || fmt.Sprint(read) != fmt.Sprint(listed) {
		t.Errorf("found %v in place, %v by List; want [web-0 web-2 web-4] both", read, listed)
	}
	if in.answered == 0 {
		t.Error("the lookups listed instead of reading the index in place")
	}
}
