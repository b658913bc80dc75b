package controller

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/reloader-operator/reloader/internal/writer"
)

func deploymentAt(rv string, annotations, labels map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1",
		ResourceVersion: rv, Annotations: annotations, Labels: labels}}
}

// written notes a write of u1 from from that returned to.
func (e *echoes) written(from, to string) bool {
	e.begin("u1", from)
	return e.end("u1", to)
}

// An echo is the update from the copy written from to the object the write returned, and
// nothing else: an update in between, or to a later version, is queued.
func TestEchoesHeard(t *testing.T) {
	var e echoes
	e.written("5", "7")
	if e.heard(deploymentAt("6", nil, nil), deploymentAt("8", nil, nil)) {
		t.Fatal("an update to another version was taken for the write")
	}
	if e.len() != 1 {
		t.Fatal("an update to another version forgot the write")
	}
	if e.heard(deploymentAt("6", nil, nil), deploymentAt("7", nil, nil)) {
		t.Fatal("the write's version after an update in between was taken for the write alone")
	}
	if e.len() != 0 {
		t.Fatal("the write's version heard is still kept")
	}
	e.written("5", "7")
	if !e.heard(deploymentAt("5", nil, nil), deploymentAt("7", nil, nil)) {
		t.Fatal("the write alone was not heard as its echo")
	}
	if e.heard(deploymentAt("5", nil, nil), deploymentAt("7", nil, nil)) {
		t.Fatal("one write was heard twice")
	}
	e.written("5", "7")
	e.forget("u1")
	if e.len() != 0 {
		t.Fatal("forget kept the write")
	}
	if e.written("5", "") || e.len() != 0 {
		t.Fatal("a failed write was kept, or asked for a requeue with nothing dropped")
	}
}

// An update heard while the write is in flight never waits: the first from the copy written
// from is dropped on trust, and the write's answer settles it. Not the echo (another version,
// or the write failed): the workload is requeued.
func TestEchoesHeardBeforeTheAnswer(t *testing.T) {
	for _, tc := range []struct {
		name, heard, to string
		requeue         bool
	}{
		{"the echo, early", "7", "7", false},
		{"another writer's update, then the write onto it", "6", "7", true},
		{"the write failed", "6", "", true},
		{"the write returned more than was written", "7", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e echoes
			e.begin("u1", "5")
			if !e.heard(deploymentAt("5", nil, nil), deploymentAt(tc.heard, nil, nil)) {
				t.Fatal("the first update from the copy written from was queued while the write was in flight")
			}
			if e.heard(deploymentAt(tc.heard, nil, nil), deploymentAt("9", nil, nil)) {
				t.Fatal("a second update while the write was in flight was dropped")
			}
			if got := e.end("u1", tc.to); got != tc.requeue {
				t.Fatalf("requeue = %v, want %v", got, tc.requeue)
			}
			if e.len() != 0 {
				t.Fatal("the write is still kept after its echo was settled")
			}
		})
	}
	var e echoes
	e.begin("u1", "5")
	if e.heard(deploymentAt("4", nil, nil), deploymentAt("5", nil, nil)) {
		t.Fatal("an update to the copy written from (not from it) was dropped")
	}
	if e.end("u1", "6") {
		t.Fatal("requeued with nothing dropped")
	}
}

// A write is noted only when the object it returned holds what was written and no more:
// the guard lets an annotation or a label added meanwhile through.
func TestEchoOnlyOfWhatWasWritten(t *testing.T) {
	written := map[string]string{"reloader.dev/source-hashes": "h"}
	want := func() *echoWant {
		return &echoWant{uid: "u1", from: "5", annotations: written, labels: map[string]string{"app": "web"}}
	}
	with := func(m map[string]string, k, v string) map[string]string {
		out := map[string]string{k: v}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		configs bool
		got     *appsv1.Deployment
		noted   bool
	}{
		{"as written", true, deploymentAt("7", written, map[string]string{"app": "web"}), true},
		{"revision written by the Deployment controller", true, deploymentAt("7", with(written, writer.RevisionAnnotation, "2"), map[string]string{"app": "web"}), true},
		{"kubectl's copy, which the cache drops", true, deploymentAt("7", with(written, corev1.LastAppliedConfigAnnotation, "{}"), map[string]string{"app": "web"}), true},
		{"an annotation added meanwhile", true, deploymentAt("7", with(written, "reloader.stakater.com/auto", "true"), map[string]string{"app": "web"}), false},
		{"a label added meanwhile", true, deploymentAt("7", written, map[string]string{"app": "web", "tier": "x"}), false},
		{"a label added meanwhile, no ReloaderConfigs to read it", false, deploymentAt("7", written, map[string]string{"app": "web", "tier": "x"}), true},
		{"deleted meanwhile", true, func() *appsv1.Deployment {
			d := deploymentAt("7", written, map[string]string{"app": "web"})
			now := metav1.Now()
			d.DeletionTimestamp = &now
			return d
		}(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e echoes
			w := want()
			w.checkLabels = tc.configs
			e.begin(w.uid, w.from)
			e.settle(w, tc.got, false)
			if noted := e.len() == 1; noted != tc.noted {
				t.Fatalf("noted = %v, want %v", noted, tc.noted)
			}
		})
	}
}

// A change of the revision annotation alone, which the Deployment controller writes as each
// rollout starts, reconciles nothing; any other annotation does.
func TestRevisionAloneReconcilesNothing(t *testing.T) {
	p := workloadChanged()
	old := deploymentAt("5", map[string]string{"a": "1"}, nil)
	for _, tc := range []struct {
		name string
		ann  map[string]string
		want bool
	}{
		{"revision added", map[string]string{"a": "1", writer.RevisionAnnotation: "1"}, false},
		{"an annotation changed", map[string]string{"a": "2"}, true},
		{"an annotation added", map[string]string{"a": "1", "b": "1"}, true},
		{"an annotation removed", map[string]string{}, true},
	} {
		if got := p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: deploymentAt("6", tc.ann, nil)}); got != tc.want {
			t.Errorf("%s: queued = %v, want %v", tc.name, got, tc.want)
		}
	}
}
