package controller

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
)

// noteHeard notes a change heard on a workload without record as the baselines' handlers do:
// the content before it, for a source that concerns the workload, unless a change of that
// source is noted already (the first note stands); and makes the plan roll on it.
func TestNoteHeard(t *testing.T) {
	cm := func(v string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app"}, Data: map[string]string{"k": v}}
	}
	app, other := source.ID{Kind: source.ConfigMap, Name: "app"}, source.ID{Kind: source.ConfigMap, Name: "other"}
	sources := map[source.ID]sourcecache.Observed{app: {}}
	hashOf := func(_ source.ID, o client.Object) string {
		if o == nil {
			return reload.Absent
		}
		return hash.ConfigMap(o.(*corev1.ConfigMap))
	}
	v1, v2, v3 := hash.ConfigMap(cm("1")), hash.ConfigMap(cm("2")), hash.ConfigMap(cm("3"))
	now := map[source.ID]reload.Observed{app: {Hash: v3}}
	for _, tc := range []struct {
		name  string
		in    reload.Input
		heard map[source.ID]client.Object
		want  reload.Record
		rolls bool
	}{
		{name: "nothing heard", in: reload.Input{Sources: now}, want: nil},
		{name: "heard: the content before it", in: reload.Input{Sources: now}, heard: map[source.ID]client.Object{app: cm("2")},
			want: reload.Record{"configmap/app": v2}, rolls: true},
		{name: "heard as created", in: reload.Input{Sources: now, Events: reload.Events{OnCreate: true}}, heard: map[source.ID]client.Object{app: nil},
			want: reload.Record{"configmap/app": reload.Absent}, rolls: true},
		{name: "an earlier note stands", in: reload.Input{Sources: now, Baseline: reload.Record{"configmap/app": v1}}, heard: map[source.ID]client.Object{app: cm("2")},
			want: reload.Record{"configmap/app": v1}, rolls: true},
		{name: "a source that does not concern it", in: reload.Input{Sources: now}, heard: map[source.ID]client.Object{other: cm("2")}, want: nil},
		{name: "recorded: its record counts", in: reload.Input{Sources: now, HasRecord: true, Record: reload.Record{"configmap/app": v3}}, heard: map[source.ID]client.Object{app: cm("2")},
			want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.Baseline = noteHeard(tc.in, hashOf, sources, tc.heard)
			if !maps.Equal(in.Baseline, tc.want) || (in.Baseline == nil) != (tc.want == nil) {
				t.Errorf("baseline %v, want %v", in.Baseline, tc.want)
			}
			if got := reload.MakePlan(in).Reloads(); got != tc.rolls {
				t.Errorf("the plan rolls: %v, want %v", got, tc.rolls)
			}
		})
	}
}
