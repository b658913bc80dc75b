package writer

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/reloader-operator/reloader/internal/reload"
)

// The guarded patch tests the uid, the generation, each annotation and label read (an empty
// value included) and the absence of reloader's annotations, then writes only what differs:
// a list whose length changes whole, a field set back to its omitted zero removed.
func TestGuardedPatchTestsWhatWasReadAndWritesTheDifference(t *testing.T) {
	obj := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "u1", Generation: 7,
			Annotations: map[string]string{"a/b": "", "reloader.stakater.com/auto": "true", "deployment.kubernetes.io/revision": "3"},
			Labels:      map[string]string{"app": "web"}},
		Spec: appsv1.DeploymentSpec{Paused: true, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Env: []corev1.EnvVar{{Name: "A", Value: "1"}}}, {Name: "side"}}}}},
	}
	updated := obj.DeepCopy()
	updated.Annotations[reload.RecordAnnotation] = "rec"
	delete(updated.Annotations, "a/b")
	updated.Spec.Paused = false
	updated.Spec.Template.Spec.Containers[0].Env = append(updated.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: "B", Value: "2"})

	patch, ok, err := guardedPatch(obj, updated, guardKeys(reload.DefaultKeys()))
	if err != nil || !ok || patch.Type() != types.JSONPatchType {
		t.Fatalf("guardedPatch: %v, %v", ok, err)
	}
	data, err := patch.Data(updated)
	if err != nil {
		t.Fatal(err)
	}
	var ops []map[string]any
	if err := json.Unmarshal(data, &ops); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	var got []string
	for _, op := range ops {
		v, _ := json.Marshal(op["value"])
		if op["op"] == "remove" {
			v = nil
		}
		got = append(got, op["op"].(string)+" "+op["path"].(string)+" "+string(v))
	}
	for _, want := range []string{
		`test /metadata/uid "u1"`,
		`test /metadata/generation 7`,
		`test /metadata/annotations/a~1b ""`,
		`test /metadata/annotations/reloader.stakater.com~1auto "true"`,
		`test /metadata/annotations/reloader.dev~1source-hashes null`,
		`test /metadata/annotations/reloader.stakater.com~1search null`,
		`test /metadata/labels/app "web"`,
		`remove /metadata/annotations/a~1b `,
		`add /metadata/annotations/reloader.dev~1source-hashes "rec"`,
		`remove /spec/paused `, // false is omitted from the object: absent, as the server stores it
		`replace /spec/template/spec/containers/0/env [{"name":"A","value":"1"},{"name":"B","value":"2"}]`,
	} {
		if !slices.Contains(got, want) {
			t.Errorf("no %q in\n%q", want, got)
		}
	}
	if slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "revision") }) {
		t.Errorf("the revision annotation, written through the status, is tested: %q", got)
	}
	// Only tests, then the four writes: nothing else of the object is written.
	if n := len(got) - len(slices.DeleteFunc(slices.Clone(got), func(s string) bool { return s[:5] != "test " })); n != 4 {
		t.Errorf("%d writes, want 4: %q", n, got)
	}

	// A copy read without annotations: kubectl's last-applied copy may be on the stored
	// object, dropped from the cache; the caller keeps the resourceVersion.
	bare := obj.DeepCopy()
	bare.Annotations = nil
	if _, ok, _ := guardedPatch(bare, updated, nil); ok {
		t.Error("a copy without annotations was guarded")
	}
}
