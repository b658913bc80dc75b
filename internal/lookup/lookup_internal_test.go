package lookup

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/cachemem/nsindex"
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

// listsRefused is a client whose every List fails: a lookup that lists shows.
type listsRefused struct {
	client.Client
	lists int
}

func (c *listsRefused) List(context.Context, client.ObjectList, ...client.ListOption) error {
	c.lists++
	return errors.New("listed")
}

// informersOf is a cache.Informers of one informer per Go type.
type informersOf struct {
	cache.Informers
	by map[reflect.Type]toolscache.SharedIndexInformer
}

func (i informersOf) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	return i.by[reflect.TypeOf(obj)], nil
}

// listOnly is a ListWatch whose first list is a LIST: its watch sends no initial events.
type listOnly struct{ *toolscache.ListWatch }

func (listOnly) IsWatchListSemanticsUnSupported() bool { return true }

// informerOf runs an informer, indexed by namespace as controller-runtime's are, over list.
func informerOf(obj, list runtime.Object) toolscache.SharedIndexInformer {
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) { return list.DeepCopyObject(), nil },
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			return watch.NewFake(), nil
		},
	}
	return toolscache.NewSharedIndexInformer(listOnly{lw}, obj, 0, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
}

// Through a client that reads the cache's indexes in place (Reading), once the informers'
// first lists are in, the lookups by source and of a namespace's ReloaderConfigs find what
// the cache holds without a List; before, and for types or indexes not kept, it declines.
func TestLookupsReadTheIndexInPlaceWhereTheClientCan(t *testing.T) {
	kind, keys := workload.Deployment(), reload.DefaultKeys()
	deployments := &appsv1.DeploymentList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
	for i := range 5 {
		d := appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("web-%d", i),
			Annotations: map[string]string{keys.Auto: "true"}}}
		cm := "cfg"
		if i%2 == 1 {
			cm = "other"
		}
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", EnvFrom: []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}}}}
		deployments.Items = append(deployments.Items, d)
	}
	configs := &v1alpha1.ReloaderConfigList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
	for _, at := range []struct{ ns, name string }{{"ns", "b-config"}, {"ns", "a-config"}, {"elsewhere", "c-config"}} {
		cfg := v1alpha1.ReloaderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: at.ns, Name: at.name, UID: types.UID(at.name), Generation: 1}}
		cfg.Spec.Sources = []v1alpha1.Source{{Kind: "ConfigMap", Name: "unused"}}
		cfg.Spec.Targets = []v1alpha1.Target{{Kind: "Deployment", Name: "web-0"}}
		configs.Items = append(configs.Items, cfg)
	}
	byType := map[reflect.Type]toolscache.SharedIndexInformer{
		reflect.TypeOf(&appsv1.Deployment{}):       informerOf(&appsv1.Deployment{}, deployments),
		reflect.TypeOf(&v1alpha1.ReloaderConfig{}): informerOf(&v1alpha1.ReloaderConfig{}, configs),
	}
	stores := &Stores{}
	ctx := context.Background()
	if err := IndexWorkloads(ctx, nsindex.Indexer{Cache: informersOf{by: byType}, Kept: stores.Keep}, kind, keys); err != nil {
		t.Fatal(err)
	}
	stores.Keep(&v1alpha1.ReloaderConfig{}, byType[reflect.TypeOf(&v1alpha1.ReloaderConfig{})])
	refused := &listsRefused{}
	reading := Reading{Client: refused, Stores: stores}
	if reading.Each(&appsv1.DeploymentList{}, "ns", IndexSources, "configmap/cfg", func(client.Object) {}) {
		t.Error("read in place before the informer's first list was in: a List would wait for it")
	}

	run, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, inf := range byType {
		go inf.RunWithContext(run)
	}
	synced, stop := context.WithTimeout(run, 10*time.Second)
	defer stop()
	for _, inf := range byType {
		if !toolscache.WaitForCacheSync(synced.Done(), inf.HasSynced) {
			t.Fatal("an informer did not sync")
		}
	}
	for _, declined := range []struct {
		list  client.ObjectList
		field string
	}{
		{&corev1.PodList{}, IndexSources},                // no store kept
		{&unstructured.UnstructuredList{}, IndexSources}, // one type for every kind: never kept
		{&appsv1.DeploymentList{}, "no-such-field"},      // no such index
	} {
		if reading.Each(declined.list, "ns", declined.field, "configmap/cfg", func(client.Object) {}) {
			t.Errorf("read %T by %s in place: it has no such store or index, and a List answers", declined.list, declined.field)
		}
	}

	l := Lookup{Client: reading, Policy: reload.Policy{Keys: keys}, Configs: &reloaderconfig.Cache{}}
	var found []string
	for _, w := range l.Affected(ctx, kind, "ns", source.ID{Kind: source.ConfigMap, Name: "cfg"}, nil, nil) {
		found = append(found, w.GetName())
	}
	if slices.Sort(found); fmt.Sprint(found) != "[web-0 web-2 web-4]" {
		t.Errorf("found %v, want [web-0 web-2 web-4]", found)
	}
	kept, err := l.NamespaceConfigs(ctx, "ns")
	var names []string
	for _, c := range kept {
		names = append(names, c.Name)
	}
	if err != nil || fmt.Sprint(names) != "[a-config b-config]" {
		t.Errorf("the namespace's ReloaderConfigs: %v, %v; want [a-config b-config], in name order", names, err)
	}
	if refused.lists > 0 {
		t.Errorf("%d Lists made: the lookups did not read the cache in place", refused.lists)
	}
}
