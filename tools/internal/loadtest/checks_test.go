package loadtest

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/reloader-operator/reloader/internal/testutil"
)

// The checks read what a real API server returns as stored; a fake client stores the same.
func TestChecks(t *testing.T) {
	src := Source{Kind: ConfigMap, Namespace: "ns", Name: "cm"}
	mk := func(name string, annotated bool, revision string, paused bool) (Workload, client.Object) {
		w := Workload{Kind: Deployment, Namespace: "ns", Name: name, Refs: []Ref{uses(src)}}
		o := workloadObject(w).(*appsv1.Deployment)
		if annotated {
			o.Spec.Template.Annotations = map[string]string{"reloader.stakater.com/last-reloaded-from": `{"kind":"ConfigMap"}`}
		}
		o.Annotations["deployment.kubernetes.io/revision"] = revision
		o.Spec.Paused = paused
		return w, o
	}
	specs, tracked := map[string]Workload{}, map[string]bool{}
	var objs []client.Object
	for _, c := range []struct {
		name      string
		annotated bool
		revision  string
		paused    bool
	}{{"cut", true, "2", false}, {"not-cut", false, "4", false}, {"paused", true, "1", true}, {"quiet", false, "1", false}} {
		w, o := mk(c.name, c.annotated, c.revision, c.paused)
		specs[w.Key()], tracked[w.Key()] = w, true
		objs = append(objs, o)
	}
	now := time.Now()
	three := []time.Time{now, now, now}
	changes := map[string][]time.Time{"Deployment/ns/cut": three, "Deployment/ns/not-cut": three, "Deployment/ns/paused": three}
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	got, err := runChecks(context.Background(), cl, []string{CheckLastReloadedFrom, CheckPauseCut}, checkInput{tracked: tracked, specs: specs, changes: changes})
	testutil.Must(t, err)
	want := map[string]float64{
		"reloaded workloads without last-reloaded-from":                       1, // not-cut; quiet never reloaded
		"reloaded workloads checked":                                          3,
		"Deployments whose every template change rolled out (pause cut none)": 1, // not-cut: 3 rollouts for 3 changes
		"Deployments left paused":                                             1,
		"rollouts (new ReplicaSets)":                                          1 + 3,
		"template changes":                                                    9,
	}
	if len(got) != len(want) {
		t.Fatalf("figures %+v", got)
	}
	for _, f := range got {
		if f.Value != want[f.Name] {
			t.Errorf("%s: %v, want %v", f.Name, f.Value, want[f.Name])
		}
	}
}
