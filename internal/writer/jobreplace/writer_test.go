package jobreplace

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/report"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/workload"
	"github.com/reloader-operator/reloader/internal/writer"
	"github.com/reloader-operator/reloader/internal/writer/writertest"
)

var change = []reload.Change{{ID: source.ID{Kind: source.ConfigMap, Name: "conf"}}}

func testKey(t *testing.T) hash.Key {
	key, err := hash.NewKey(bytes.Repeat([]byte{7}, hash.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// apiLike is a fake client that gives each object it creates a UID, as the API server does,
// and remembers the records as they were signed. refuse, when set, answers a create first.
type apiLike struct {
	client.WithWatch
	signed []*appsv1.ControllerRevision
}

func newAPILike(t *testing.T, refuse func(obj client.Object, dryRun bool) error, objs ...client.Object) *apiLike {
	t.Helper()
	var n atomic.Int64
	a := &apiLike{}
	a.WithWatch = fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				o := &client.CreateOptions{}
				o.ApplyOptions(opts)
				if refuse != nil {
					if err := refuse(obj, len(o.DryRun) > 0); err != nil {
						return err
					}
				}
				if obj.GetUID() == "" && len(o.DryRun) == 0 {
					obj.SetUID(types.UID(fmt.Sprintf("uid-%d", n.Add(1))))
				}
				return c.Create(ctx, obj, opts...)
			},
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if err := c.Patch(ctx, obj, patch, opts...); err != nil {
					return err
				}
				if rec, ok := obj.(*appsv1.ControllerRevision); ok {
					a.signed = append(a.signed, rec.DeepCopy())
				}
				return nil
			},
		}).Build()
	return a
}

func storedJob() *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "migrate", UID: "job-1", Labels: map[string]string{"controller-uid": "job-1"}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "m", Image: "m:1"}}}}},
	}
}

// patchCalls is a writer.Writer standing in for the patch writer.
type patchCalls struct{ n int }

func (p *patchCalls) Write(context.Context, client.Object, client.Object, writer.Input) error {
	p.n++
	return nil
}

func getJob(t *testing.T, c client.Client) (*batchv1.Job, bool) {
	t.Helper()
	j := &batchv1.Job{}
	err := c.Get(context.Background(), types.NamespacedName{Namespace: "a", Name: "migrate"}, j)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return j, true
}

func records(t *testing.T, c client.Client) []appsv1.ControllerRevision {
	t.Helper()
	var list appsv1.ControllerRevisionList
	if err := c.List(context.Background(), &list, client.InNamespace("a")); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// A reload of a Job writes its replacement down, signs the record under the install key,
// deletes the Job and creates the replacement, then drops the record.
func TestReplaceSignsTheRecordAndCreatesTheNewJob(t *testing.T) {
	c := newAPILike(t, nil, storedJob())
	rep := &writertest.Reporter{}
	key := testKey(t)
	patch := &patchCalls{}
	w := &Writer{Client: c, Kind: workload.Job(), Key: key, Report: rep, Patch: patch}
	old, _ := getJob(t, c)
	updated := old.DeepCopy()
	updated.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "CONF", Value: "h2"}}
	if err := w.Write(context.Background(), old, updated, writer.Input{Changes: change}); err != nil {
		t.Fatal(err)
	}
	if patch.n != 0 || !slices.Equal(rep.Actions, []string{"Job/replace-job"}) {
		t.Errorf("patch writer called %d times, actions %v; want a replacement only", patch.n, rep.Actions)
	}
	if len(c.signed) != 1 {
		t.Fatalf("%d records signed; want 1", len(c.signed))
	}
	rec := c.signed[0]
	if rec.Labels[ReplacementLabel] != "Job" || rec.Annotations[replacesUIDAnnotation] != "job-1" || rec.Name != recordName("Job", "migrate") {
		t.Errorf("record %s %v %v", rec.Name, rec.Labels, rec.Annotations)
	}
	obj, refused := checkRecord(key, workload.Job(), rec)
	if refused != nil {
		t.Fatalf("the record written is refused: %v", refused)
	}
	if env := obj.(*batchv1.Job).Spec.Template.Spec.Containers[0].Env; len(env) != 1 {
		t.Errorf("record holds env %v; want the new one", env)
	}
	if _, refused := checkRecord(hash.Key{}, workload.Job(), rec); refused == nil {
		t.Error("the record is trusted without the key")
	}
	now, ok := getJob(t, c)
	switch {
	case !ok:
		t.Fatal("no Job after the replacement")
	case now.UID == "job-1" || len(now.Spec.Template.Spec.Containers[0].Env) != 1:
		t.Errorf("Job %s env %v; want a new Job with the new env", now.UID, now.Spec.Template.Spec.Containers[0].Env)
	case now.Labels["controller-uid"] != "":
		t.Errorf("new Job keeps the old Job's UID label: %v", now.Labels)
	}
	if n := len(records(t, c)); n != 0 {
		t.Errorf("%d records left after the replacement", n)
	}
	if held, _ := w.Pending(types.NamespacedName{Namespace: "a", Name: "migrate"}); held {
		t.Error("replacement still held once done")
	}
}

// A write that reloads nothing (a Job's first record) is the patch writer's.
func TestWriteWithoutChangesIsPatched(t *testing.T) {
	c := newAPILike(t, nil, storedJob())
	patch := &patchCalls{}
	w := &Writer{Client: c, Kind: workload.Job(), Report: &writertest.Reporter{}, Patch: patch}
	old, _ := getJob(t, c)
	if err := w.Write(context.Background(), old, old.DeepCopy(), writer.Input{}); err != nil {
		t.Fatal(err)
	}
	if now, _ := getJob(t, c); patch.n != 1 || now.UID != "job-1" || len(records(t, c)) != 0 {
		t.Errorf("patch writer called %d times; Job %s; want the Job patched, not replaced", patch.n, now.UID)
	}
}

// A replacement the API server would refuse (its dry run is refused) deletes nothing.
func TestReplaceRefusedByAdmissionKeepsTheJob(t *testing.T) {
	refuse := func(obj client.Object, dryRun bool) error {
		if _, ok := obj.(*batchv1.Job); ok && dryRun {
			return apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, obj.GetName(), errors.New("denied by policy"))
		}
		return nil
	}
	c := newAPILike(t, refuse, storedJob())
	w := &Writer{Client: c, Kind: workload.Job(), Key: testKey(t), Report: &writertest.Reporter{}, Patch: &patchCalls{}}
	old, _ := getJob(t, c)
	err := w.Write(context.Background(), old, old.DeepCopy(), writer.Input{Changes: change})
	if err == nil || !strings.Contains(err.Error(), "would refuse the replacement") {
		t.Fatalf("error %v; want the refusal", err)
	}
	if now, ok := getJob(t, c); !ok || now.UID != "job-1" {
		t.Error("Job deleted although its replacement would be refused")
	}
	if n := len(records(t, c)); n != 0 {
		t.Errorf("%d records written for a refused replacement", n)
	}
}

// A dry run refused only by the namespace's quota on Jobs, at its limit, goes ahead: the
// replacement takes the old Job's place.
func TestReplaceAtTheJobQuotaGoesAhead(t *testing.T) {
	refuse := func(obj client.Object, dryRun bool) error {
		if _, ok := obj.(*batchv1.Job); ok && dryRun {
			return apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, obj.GetName(),
				errors.New("exceeded quota: jobs, requested: count/jobs.batch=1, used: count/jobs.batch=1, limited: count/jobs.batch=1"))
		}
		return nil
	}
	c := newAPILike(t, refuse, storedJob())
	w := &Writer{Client: c, Kind: workload.Job(), Key: testKey(t), Report: &writertest.Reporter{}, Patch: &patchCalls{}}
	old, _ := getJob(t, c)
	if err := w.Write(context.Background(), old, old.DeepCopy(), writer.Input{Changes: change}); err != nil {
		t.Fatal(err)
	}
	if now, ok := getJob(t, c); !ok || now.UID == "job-1" {
		t.Error("Job at its quota not replaced")
	}
}

// record is a record of the replacement of a/migrate, stored with UID rec-1, signed with key
// when it is valid.
func record(t *testing.T, key hash.Key) *appsv1.ControllerRevision {
	t.Helper()
	fresh := workload.Job().(workload.Recreated).Replacement(storedJob())
	data, err := json.Marshal(fresh)
	if err != nil {
		t.Fatal(err)
	}
	rec := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: recordName("Job", "migrate"), UID: "rec-1",
			Labels:      map[string]string{ReplacementLabel: "Job"},
			Annotations: map[string]string{replacesUIDAnnotation: "job-1", replacesNameAnnotation: "migrate"}},
		Data: runtime.RawExtension{Raw: data}, Revision: 1,
	}
	if mac := recordMAC(key, "Job", "a", "migrate", "job-1", "rec-1", data); mac != nil {
		rec.Annotations[recordMACAnnotation] = hex.EncodeToString(mac)
	}
	return rec
}

// A signed record left by a process that died after the delete is finished by the next: the
// Job is created from it, and the record dropped.
func TestResumeCreatesTheJobOfASignedRecord(t *testing.T) {
	key := testKey(t)
	c := newAPILike(t, nil, record(t, key))
	rep := &writertest.Reporter{}
	w := &Writer{Client: c, Kind: workload.Job(), Key: key, Report: rep, Patch: &patchCalls{}}
	nn := types.NamespacedName{Namespace: "a", Name: "migrate"}
	w.jobs.learn(nn, pendingJob{replaces: "job-1", record: "rec-1"})
	_, handled, err := w.Resume(context.Background(), nn, nil, false)
	if err != nil || !handled {
		t.Fatalf("resume: handled %v, %v", handled, err)
	}
	if _, ok := getJob(t, c); !ok {
		t.Fatal("Job of a signed record not created")
	}
	if !slices.Equal(rep.Recreate, []string{"Job/a"}) || !slices.Equal(rep.Reasons(), []string{report.ReasonReloaded}) {
		t.Errorf("reported %v, Events %v", rep.Recreate, rep.Reasons())
	}
	if n := len(records(t, c)); n != 0 {
		t.Errorf("%d records left", n)
	}
	if _, handled, _ := w.Resume(context.Background(), nn, nil, false); handled {
		t.Error("resumed again with nothing pending")
	}
}

// A record reloader did not sign is never acted on: nothing is created, the refusal is
// reported, and the record, not reloader's to delete, stays.
func TestResumeRefusesAnUnsignedRecord(t *testing.T) {
	c := newAPILike(t, nil, record(t, hash.Key{}))
	rep := &writertest.Reporter{}
	w := &Writer{Client: c, Kind: workload.Job(), Key: testKey(t), Report: rep, Patch: &patchCalls{}}
	nn := types.NamespacedName{Namespace: "a", Name: "migrate"}
	w.jobs.learn(nn, pendingJob{replaces: "job-1", record: "rec-1"})
	if _, handled, err := w.Resume(context.Background(), nn, nil, false); err != nil || !handled {
		t.Fatalf("resume: handled %v, %v", handled, err)
	}
	if _, ok := getJob(t, c); ok {
		t.Fatal("Job created from an unsigned record")
	}
	if !slices.Equal(rep.Refused, []string{"Job/" + refusedUnauthenticated}) || !slices.Equal(rep.Reasons(), []string{ReasonUntrustedRecord}) {
		t.Errorf("refusals %v, Events %v", rep.Refused, rep.Reasons())
	}
	if n := len(records(t, c)); n != 1 {
		t.Errorf("%d records; want the refused one left", n)
	}
	if held, _ := w.Pending(nn); held {
		t.Error("refused record still held")
	}
}

func cronJob(suspend bool, annotations map[string]string) *batchv1.CronJob {
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "nightly", UID: "cj-1", Generation: 2, Annotations: annotations},
		Spec: batchv1.CronJobSpec{Schedule: "@daily", Suspend: &suspend, JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "n", Image: "n:1"}}}}}}},
	}
}

// A CronJob that runs on reload starts one Job per reload, however often the write is
// retried, and is patched each time; one suspended, or opted out, starts none.
func TestRunOnReloadStartsOneJobPerReload(t *testing.T) {
	for _, tc := range []struct {
		name string
		cj   *batchv1.CronJob
		dflt bool
		jobs int
	}{
		{"runs", cronJob(false, nil), true, 1},
		{"suspended", cronJob(true, nil), true, 0},
		{"opted out", cronJob(false, map[string]string{reload.RunOnReloadAnnotation: "false"}), true, 0},
		{"opted in", cronJob(false, map[string]string{reload.RunOnReloadAnnotation: "true"}), false, 1},
		{"off", cronJob(false, nil), false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newAPILike(t, nil, tc.cj)
			patch := &patchCalls{}
			rep := &writertest.Reporter{}
			w := &RunOnReload{Client: c, Kind: workload.CronJob(), Report: rep, Patch: patch}
			in := writer.Input{Changes: change, Record: reload.Record{"configmap/conf": "h2"}, RunCronJobs: tc.dflt}
			for range 2 {
				if err := w.Write(context.Background(), tc.cj, tc.cj.DeepCopy(), in); err != nil {
					t.Fatal(err)
				}
			}
			var jobs batchv1.JobList
			if err := c.List(context.Background(), &jobs, client.InNamespace("a")); err != nil {
				t.Fatal(err)
			}
			if len(jobs.Items) != tc.jobs || patch.n != 2 {
				t.Errorf("%d Jobs, %d patches; want %d Jobs and 2 patches", len(jobs.Items), patch.n, tc.jobs)
			}
			if tc.jobs > 0 && jobs.Items[0].Name != runName(tc.cj, in.Record) {
				t.Errorf("Job %s; want %s", jobs.Items[0].Name, runName(tc.cj, in.Record))
			}
			if err := w.Write(context.Background(), tc.cj, tc.cj.DeepCopy(), writer.Input{RunCronJobs: tc.dflt}); err != nil || patch.n != 3 {
				t.Errorf("write without changes: %v, %d patches", err, patch.n)
			}
		})
	}
}
