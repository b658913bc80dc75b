package writer_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/workload"
	"github.com/reloader-operator/reloader/internal/writer"
)

// sent is a patch the writer sent.
type sent struct {
	typ  types.PatchType
	data string
}

// patchClient is a fake client holding objs that remembers each patch sent.
func patchClient(t *testing.T, objs ...client.Object) (client.Client, *[]sent) {
	t.Helper()
	var patches []sent
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			data, err := patch.Data(obj)
			if err != nil {
				return err
			}
			patches = append(patches, sent{patch.Type(), string(data)})
			return c.Patch(ctx, obj, patch, opts...)
		}}).Build()
	return c, &patches
}

func deployment(annotations map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", UID: "uid-web", Generation: 3, Annotations: annotations},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "web:1"}}}}},
	}
}

func get(t *testing.T, c client.Client, obj client.Object) client.Object {
	t.Helper()
	out := obj.DeepCopyObject().(client.Object)
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), out); err != nil {
		t.Fatal(err)
	}
	return out
}

var change = []reload.Change{{ID: source.ID{Kind: source.ConfigMap, Name: "conf"}}}

// reloaded is the copy of d a reload writes: a new env var in its template and the record.
func reloaded(d *appsv1.Deployment) *appsv1.Deployment {
	u := d.DeepCopy()
	u.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "CONF", Value: "h2"}}
	if u.Annotations == nil {
		u.Annotations = map[string]string{}
	}
	u.Annotations[reload.RecordAnnotation] = "rec-2"
	return u
}

// A reload is one JSON patch that first tests what the decision read (uid, generation, each
// annotation, the absence of the rule annotations), then writes only what differs.
func TestPatchWritesAReloadAsOneGuardedPatch(t *testing.T) {
	c, patches := patchClient(t, deployment(map[string]string{reload.RecordAnnotation: "rec-1", "team": "a"}))
	p := &writer.Patch{Client: c, Kind: workload.Deployment(), Keys: reload.DefaultKeys()}
	old := get(t, c, deployment(nil)).(*appsv1.Deployment)
	if err := p.Write(context.Background(), old, reloaded(old), writer.Input{Changes: change}); err != nil {
		t.Fatal(err)
	}
	if len(*patches) != 1 || (*patches)[0].typ != types.JSONPatchType {
		t.Fatalf("patches %+v; want one JSON patch", *patches)
	}
	var ops []map[string]any
	if err := json.Unmarshal([]byte((*patches)[0].data), &ops); err != nil {
		t.Fatal(err)
	}
	tests := map[string]bool{}
	var writes []string
	for _, op := range ops {
		if op["op"] == "test" {
			tests[op["path"].(string)] = true
		} else {
			writes = append(writes, op["op"].(string)+" "+op["path"].(string))
		}
	}
	for _, path := range []string{"/metadata/uid", "/metadata/generation", "/metadata/annotations/team",
		"/metadata/annotations/reloader.dev~1source-hashes", "/metadata/annotations/reloader.stakater.com~1auto"} {
		if !tests[path] {
			t.Errorf("no test of %s in %s", path, (*patches)[0].data)
		}
	}
	want := []string{"replace /metadata/annotations/reloader.dev~1source-hashes", "add /spec/template/spec/containers/0/env"}
	if strings.Join(writes, ",") != strings.Join(want, ",") {
		t.Errorf("writes %q; want %q", writes, want)
	}
	stored := get(t, c, old).(*appsv1.Deployment)
	if stored.Annotations[reload.RecordAnnotation] != "rec-2" || len(stored.Spec.Template.Spec.Containers[0].Env) != 1 {
		t.Errorf("stored %v %v", stored.Annotations, stored.Spec.Template.Spec.Containers[0].Env)
	}
}

// A reload planned from a copy whose record someone changed since is not written at all.
func TestPatchFromAStaleCopyWritesNothing(t *testing.T) {
	c, _ := patchClient(t, deployment(map[string]string{reload.RecordAnnotation: "rec-1"}))
	p := &writer.Patch{Client: c, Kind: workload.Deployment(), Keys: reload.DefaultKeys()}
	old := get(t, c, deployment(nil)).(*appsv1.Deployment)
	newer := old.DeepCopy()
	newer.Annotations[reload.RecordAnnotation] = "rec-other"
	if err := c.Update(context.Background(), newer); err != nil {
		t.Fatal(err)
	}
	if err := p.Write(context.Background(), old, reloaded(old), writer.Input{Changes: change}); err == nil {
		t.Fatal("a reload from a stale copy was written")
	}
	stored := get(t, c, old).(*appsv1.Deployment)
	if stored.Annotations[reload.RecordAnnotation] != "rec-other" || len(stored.Spec.Template.Spec.Containers[0].Env) != 0 {
		t.Errorf("stored %v %v; want the other writer's record and the template as it was", stored.Annotations, stored.Spec.Template.Spec.Containers[0].Env)
	}
}

// A copy with no annotations can't be guarded by tests (the stored object may hold some the
// cache dropped): its first record carries the resourceVersion read instead.
func TestPatchOfACopyWithoutAnnotationsIsLocked(t *testing.T) {
	c, patches := patchClient(t, deployment(nil))
	p := &writer.Patch{Client: c, Kind: workload.Deployment(), Keys: reload.DefaultKeys()}
	old := get(t, c, deployment(nil)).(*appsv1.Deployment)
	updated := old.DeepCopy()
	updated.Annotations = map[string]string{reload.RecordAnnotation: "rec-1"}
	if err := p.Write(context.Background(), old, updated, writer.Input{}); err != nil {
		t.Fatal(err)
	}
	if len(*patches) != 1 || (*patches)[0].typ != types.StrategicMergePatchType || !strings.Contains((*patches)[0].data, `"resourceVersion":"`+old.ResourceVersion+`"`) {
		t.Fatalf("patches %+v; want one strategic merge patch carrying resourceVersion %s", *patches, old.ResourceVersion)
	}
}

// A write of a recorded workload that reloads nothing (a pause, a last-reload time) is a
// plain strategic merge patch: nothing it writes depends on the copy read.
func TestPatchWithoutReloadOfARecordedWorkloadIsPlain(t *testing.T) {
	c, patches := patchClient(t, deployment(map[string]string{reload.RecordAnnotation: "rec-1"}))
	p := &writer.Patch{Client: c, Kind: workload.Deployment(), Keys: reload.DefaultKeys()}
	old := get(t, c, deployment(nil)).(*appsv1.Deployment)
	updated := old.DeepCopy()
	updated.Spec.Paused = true
	if err := p.Write(context.Background(), old, updated, writer.Input{}); err != nil {
		t.Fatal(err)
	}
	if len(*patches) != 1 || (*patches)[0].typ != types.StrategicMergePatchType || strings.Contains((*patches)[0].data, "resourceVersion") {
		t.Fatalf("patches %+v; want one strategic merge patch without resourceVersion", *patches)
	}
	if !get(t, c, old).(*appsv1.Deployment).Spec.Paused {
		t.Error("not paused")
	}
}

// The template of a workload that refers to a Deployment is that Deployment's; a change to it
// is written to the Deployment first, guarded as the workload's own would be.
func TestPatchWritesTheReferencedDeploymentFirst(t *testing.T) {
	owner := deployment(map[string]string{"team": "a"})
	c, patches := patchClient(t, owner)
	read := get(t, c, owner).(*appsv1.Deployment)
	tw := writer.Template{Owner: read.DeepCopy(), OwnerOriginal: read}
	tw.Tpl = &tw.Owner.Spec.Template
	tw.Tpl.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "CONF", Value: "h2"}}
	if !tw.Changed() {
		t.Fatal("template changed, Changed false")
	}
	// The workload itself: a second Deployment standing in for the referring kind.
	self := deployment(map[string]string{reload.RecordAnnotation: "rec-1"})
	self.Name = "rollout"
	if err := c.Create(context.Background(), self); err != nil {
		t.Fatal(err)
	}
	old := get(t, c, self).(*appsv1.Deployment)
	updated := old.DeepCopy()
	updated.Annotations[reload.RecordAnnotation] = "rec-2"
	p := &writer.Patch{Client: c, Kind: workload.Deployment(), Keys: reload.DefaultKeys()}
	if err := p.Write(context.Background(), old, updated, writer.Input{Changes: change, Template: tw}); err != nil {
		t.Fatal(err)
	}
	if len(*patches) != 2 || (*patches)[0].typ != types.JSONPatchType || !strings.Contains((*patches)[0].data, `"/spec/template/spec/containers/0/env"`) {
		t.Fatalf("patches %+v; want the referenced Deployment's guarded patch first", *patches)
	}
	if env := get(t, c, owner).(*appsv1.Deployment).Spec.Template.Spec.Containers[0].Env; len(env) != 1 {
		t.Errorf("referenced Deployment's env %v", env)
	}
}
