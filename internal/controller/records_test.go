package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/testutil/follower"
)

const refusedRecords = "reloader_replacement_records_refused_total"

// forgedRecord is a ControllerRevision made to look like reloader's record of a replacement
// of Job replaces in ns, holding job, with the MAC annotation set to mac unless empty.
func forgedRecord(ns, replaces string, job *batchv1.Job, mac string) *appsv1.ControllerRevision {
	data, _ := json.Marshal(job)
	rec := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reloader-job-" + replaces,
			Labels: map[string]string{controller.ReplacementLabel: "Job"},
			Annotations: map[string]string{"reloader.dev/replaces-name": replaces,
				"reloader.dev/replaces-uid": "00000000-0000-0000-0000-000000000000"}},
		Data:     runtime.RawExtension{Raw: data},
		Revision: 1,
	}
	if mac != "" {
		rec.Annotations["reloader.dev/record-mac"] = mac
	}
	return rec
}

// noJobs checks that no Job exists in any of namespaces, once reloader has handled each of
// the Jobs named by the records refused (a reconcile of it begun after since). A record that
// names another namespace than its own is refused by the handler that hears of it, which
// queues nothing: the refusal is its handling.
func noJobs(t *testing.T, since time.Time, named []types.NamespacedName, namespaces ...string) {
	t.Helper()
	for _, nn := range named {
		handledSince(t, "Job", nn, since)
	}
	for _, ns := range namespaces {
		if js := jobs(t, ns); len(js) > 0 {
			t.Errorf("Job %s/%s created from a forged record (service account %q)", ns, js[0].Name, js[0].Spec.Template.Spec.ServiceAccountName)
		}
	}
}

// refusedGrows waits until the count of refused records is above before.
func refusedGrows(t *testing.T, before float64, by int) {
	t.Helper()
	testutil.Eventually(t, "refused records counted", func() error {
		if n := counter(t, refusedRecords, map[string]string{"kind": "Job", "reason": "unauthenticated"}); n < before+float64(by) {
			return fmt.Errorf("%v refused, want %v", n, before+float64(by))
		}
		return nil
	})
}

// A tenant who may create ControllerRevisions in its own namespace writes one that looks like
// a record whose data is a Job in another namespace, with a privileged service account.
// reloader creates nothing, anywhere, and says so on the record.
func TestForgedRecordOfAJobElsewhereCreatesNothing(t *testing.T) {
	tenant, victim := newNamespace(t), newNamespace(t)
	startReloader(t, tenant)
	since := time.Now()
	before := counter(t, refusedRecords, map[string]string{"kind": "Job", "reason": "unauthenticated"})

	evil := job(victim, "evil", nil)
	evil.Spec.Template.Spec.ServiceAccountName = "cluster-admin-sa"
	create(t, forgedRecord(tenant, "evil", evil, ""))
	// Refused first, then nothing created by then nor shortly after.
	eventuallyEvent(t, tenant, "reloader-job-evil", controller.ReasonUntrustedRecord)
	refusedGrows(t, before, 1)
	noJobs(t, since, nil, tenant, victim)
}

// A forged record of a Job of its own namespace and name is refused too, whether it has no
// MAC or a made-up one.
func TestForgedRecordInPlaceCreatesNothing(t *testing.T) {
	ns := newNamespace(t)
	startReloader(t, ns)
	since := time.Now()
	before := counter(t, refusedRecords, map[string]string{"kind": "Job", "reason": "unauthenticated"})

	create(t, forgedRecord(ns, "no-mac", job(ns, "no-mac", nil), ""),
		forgedRecord(ns, "bad-mac", job(ns, "bad-mac", nil), strings.Repeat("ab", 32)))
	eventuallyEvent(t, ns, "reloader-job-no-mac", controller.ReasonUntrustedRecord)
	eventuallyEvent(t, ns, "reloader-job-bad-mac", controller.ReasonUntrustedRecord)
	refusedGrows(t, before, 2)
	noJobs(t, since, []types.NamespacedName{{Namespace: ns, Name: "no-mac"}, {Namespace: ns, Name: "bad-mac"}}, ns)
}

// reloader stops between the delete and the create of a replacement (the create is refused
// until then): the record reloader wrote is all that is left of the Job. The next reloader,
// which holds nothing in memory, reads the record from the API server, finds it signed, and
// creates the Job once with the new config; the record goes.
func TestGenuineRecordIsFinishedByTheNextProcess(t *testing.T) {
	ns, j, oldUID := recordLeftBehind(t, true)
	ctx := context.Background()
	startReloader(t, ns, ownNamespace(ns))
	replaced(t, j, oldUID)
	var records appsv1.ControllerRevisionList
	testutil.Eventually(t, "record removed", func() error {
		testutil.Must(t, k8s.List(ctx, &records, client.InNamespace(ns), client.HasLabels{controller.ReplacementLabel}))
		if n := len(records.Items); n > 0 {
			return fmt.Errorf("%d records", n)
		}
		return nil
	})
	if reasons := eventReasons(t, ns, "reloader-job-migrate"); len(reasons) > 0 {
		t.Errorf("events on the record: %v", reasons)
	}
}

// A genuine record re-written while it waits, its MAC copied and its data altered (here: the
// Job's service account), is refused by the next reloader: nothing is created. (A record's
// data is immutable: altering it takes a delete and a create.)
func TestAlteredRecordCreatesNothing(t *testing.T) {
	ns, _, _ := recordLeftBehind(t, true)
	rec := get(t, &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reloader-job-migrate"}})
	testutil.Must(t, k8s.Delete(context.Background(), rec))
	var j batchv1.Job
	testutil.Must(t, json.Unmarshal(rec.Data.Raw, &j))
	j.Spec.Template.Spec.ServiceAccountName = "cluster-admin-sa"
	altered := forgedRecord(ns, "migrate", &j, rec.Annotations["reloader.dev/record-mac"])
	altered.Annotations = rec.Annotations
	create(t, altered)
	before := counter(t, refusedRecords, map[string]string{"kind": "Job", "reason": "unauthenticated"})
	since := time.Now()
	startReloader(t, ns, ownNamespace(ns))
	eventuallyEvent(t, ns, "reloader-job-migrate", controller.ReasonUntrustedRecord)
	refusedGrows(t, before, 1)
	handledSince(t, "Job", types.NamespacedName{Namespace: ns, Name: "migrate"}, since)
	// (The namespace holds the probes of deny: only "migrate" counts.)
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "migrate"}, &j); !apierrors.IsNotFound(err) {
		t.Errorf("Job migrate created from an altered record (service account %q): %v", j.Spec.Template.Spec.ServiceAccountName, err)
	}
}

// Run without a namespace of its own (--kubeconfig), reloader keeps the install key where
// others may read it or have planted one, so it signs no record and trusts none from the
// cluster: the record left behind is unsigned, and the next process refuses it.
func TestRecordsAreNotSignedWithoutOwnNamespace(t *testing.T) {
	ns, _, _ := recordLeftBehind(t, false)
	before := counter(t, refusedRecords, map[string]string{"kind": "Job", "reason": "unauthenticated"})
	since := time.Now()
	startReloader(t, ns)
	eventuallyEvent(t, ns, "reloader-job-migrate", controller.ReasonUntrustedRecord)
	refusedGrows(t, before, 1)
	handledSince(t, "Job", types.NamespacedName{Namespace: ns, Name: "migrate"}, since)
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "migrate"}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Errorf("Job migrate created from a record of a process without a namespace of its own: %v", err)
	}
}

// recordedJob creates ConfigMap "cfg" and Job "migrate", which reloads on its changes, in ns,
// starts reloader there and waits until it has recorded the Job. It returns the ConfigMap,
// the Job, its UID and the stop of that reloader.
func recordedJob(t *testing.T, ns string, configure ...func(*options.Options)) (*corev1.ConfigMap, *batchv1.Job, types.UID, func()) {
	t.Helper()
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	j := job(ns, "migrate", map[string]string{auto: "true"}, "cfg")
	create(t, cm, j)
	stop := startReloader(t, ns, configure...)
	recorded(t, j)
	return cm, j, get(t, j).UID, stop
}

// refuseReplacement changes cm, which j uses, while the API server refuses Job creates (not
// their dry runs), and waits until reloader has deleted j and failed to create its
// replacement. It returns the lift of the refusal.
func refuseReplacement(t *testing.T, cm *corev1.ConfigMap, j *batchv1.Job) (lift func()) {
	t.Helper()
	ctx := context.Background()
	lift = deny(t, j.Namespace, admissionv1.Create, "batch", "jobs", func() error {
		return k8s.Create(ctx, job(j.Namespace, fmt.Sprintf("probe-%d", metav1.Now().UnixNano()), nil))
	})
	changeConfig(t, cm, "v2")
	testutil.Eventually(t, "old Job deleted, its replacement refused", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(j), &batchv1.Job{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Job still there: %v", err)
		}
		return nil
	})
	eventuallyEvent(t, j.Namespace, j.Name, controller.ReasonReloadFail)
	return lift
}

// recordLeftBehind replaces Job "migrate" in a new namespace and stops reloader between the
// delete and the create (the create is refused until then): the signed record is all that is
// left of the Job, signed when reloader has a namespace of its own (own), unsigned when not.
// It returns the namespace, the Job and the old Job's UID.
func recordLeftBehind(t *testing.T, own bool) (string, *batchv1.Job, types.UID) {
	t.Helper()
	ns := newNamespace(t)
	var opts []func(*options.Options)
	if own {
		opts = append(opts, ownNamespace(ns))
	}
	cm, j, oldUID, stop := recordedJob(t, ns, opts...)

	ctx := context.Background()
	lift := refuseReplacement(t, cm, j)
	stop()
	var records appsv1.ControllerRevisionList
	testutil.Must(t, k8s.List(ctx, &records, client.InNamespace(ns), client.HasLabels{controller.ReplacementLabel}))
	if len(records.Items) != 1 || (records.Items[0].Annotations["reloader.dev/record-mac"] != "") != own {
		t.Fatalf("want one record left, signed %v, got %d (annotations of the first: %v)", own, len(records.Items), func() any {
			if len(records.Items) == 0 {
				return nil
			}
			return records.Items[0].Annotations
		}())
	}
	lift()
	return ns, j, oldUID
}

// What anyone may write as a record costs reloader's cache its metadata only: the data, read
// from the API server when a record is acted on, is not kept.
func TestRecordsAreCachedWithoutData(t *testing.T) {
	ns := newNamespace(t)
	obj, setting := controller.ReplacementRecords()
	c, err := cache.New(restConfig, cache.Options{Scheme: k8s.Scheme(),
		DefaultNamespaces: map[string]cache.Config{ns: {}}, ByObject: map[client.Object]cache.ByObject{obj: setting}})
	testutil.Must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = c.Start(ctx) }()
	big := job(ns, "big", map[string]string{"padding": strings.Repeat("x", 256<<10)})
	rec := forgedRecord(ns, "big", big, strings.Repeat("ab", 32))
	rec.Annotations["padding"] = strings.Repeat("y", 200<<10)
	rec.Labels["padding"] = "z"
	rec.Finalizers = []string{"example.com/" + strings.Repeat("f", 60)}
	rec.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: strings.Repeat("o", 200), UID: "00000000-0000-0000-0000-000000000001"}}
	create(t, rec)
	t.Cleanup(func() {
		// The finalizer would hold the record, and its namespace, for ever.
		_ = k8s.Patch(context.Background(), rec, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`)))
	})
	testutil.Eventually(t, "record cached", func() error {
		var rec appsv1.ControllerRevision
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "reloader-job-big"}, &rec); err != nil {
			return err
		}
		if n := len(rec.Data.Raw); n > 0 || rec.Data.Object != nil {
			t.Fatalf("cached record holds %d bytes of data", n)
		}
		want := map[string]string{"reloader.dev/replaces-name": "big", "reloader.dev/replaces-uid": "00000000-0000-0000-0000-000000000000",
			"reloader.dev/record-mac": strings.Repeat("ab", 32)}
		if !maps.Equal(rec.Annotations, want) || rec.UID == "" || rec.Name != "reloader-job-big" {
			t.Fatalf("cached record: annotations %.200v, UID %q, name %q; want reloader's annotations only, and its identity", rec.Annotations, rec.UID, rec.Name)
		}
		if !maps.Equal(rec.Labels, map[string]string{controller.ReplacementLabel: "Job"}) || rec.Finalizers != nil || rec.OwnerReferences != nil || rec.ManagedFields != nil {
			t.Fatalf("cached record keeps labels %v, finalizers %d, owner references %d, managed fields %d; want the record label only",
				rec.Labels, len(rec.Finalizers), len(rec.OwnerReferences), len(rec.ManagedFields))
		}
		return nil
	})
}

// Someone who may watch and create ControllerRevisions keeps a copy of a genuine record,
// seen while reloader replaced Job "migrate". Later the admin deletes the Job, and the copy
// is created again, labels, annotations and data as they were: the API server gives it a new
// UID, so its MAC no longer holds, and the Job the admin deleted stays deleted.
func TestReplayedRecordCreatesNothing(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	cm, j, oldUID, _ := recordedJob(t, ns, ownNamespace(ns))
	saved := signedRecords(t, ns)

	changeConfig(t, cm, "v2")
	cur := replaced(t, j, oldUID)
	noRecords(t, ns)
	testutil.Must(t, k8s.Delete(ctx, cur, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	testutil.Eventually(t, "Job deleted by the admin", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(j), &batchv1.Job{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Job still there: %v", err)
		}
		return nil
	})

	rec := saved()
	before := counter(t, refusedRecords, map[string]string{"kind": "Job", "reason": "unauthenticated"})
	since := time.Now()
	create(t, &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: rec.Namespace, Name: rec.Name, Labels: rec.Labels, Annotations: rec.Annotations},
		Data:       runtime.RawExtension{Raw: rec.Data.Raw},
		Revision:   rec.Revision,
	})
	eventuallyEvent(t, ns, rec.Name, controller.ReasonUntrustedRecord)
	refusedGrows(t, before, 1)
	handledSince(t, "Job", client.ObjectKeyFromObject(j), since)
	var got batchv1.Job
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(j), &got); !apierrors.IsNotFound(err) {
		t.Errorf("Job migrate brought back by a replayed record (UID %s): %v", got.UID, err)
	}
}

// reloader stopped after writing a record and before signing it: the Job it replaces is
// still there, never deleted. The next reloader drops the record without a word (nothing
// would be created from it, signed or not) and leaves the Job as it is.
func TestUnsignedRecordOfALiveJobIsDroppedQuietly(t *testing.T) {
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	j := job(ns, "migrate", map[string]string{auto: "true"}, "cfg")
	create(t, cm, j)
	uid := get(t, j).UID
	rec := forgedRecord(ns, "migrate", j, "")
	rec.Annotations["reloader.dev/replaces-uid"] = string(uid)
	create(t, rec)
	before := counter(t, refusedRecords, map[string]string{"kind": "Job", "reason": "unauthenticated"})
	startReloader(t, ns)
	noRecords(t, ns)
	handled(t, j)
	if reasons := eventReasons(t, ns, rec.Name); len(reasons) > 0 {
		t.Errorf("events on the record: %v", reasons)
	}
	if n := counter(t, refusedRecords, map[string]string{"kind": "Job", "reason": "unauthenticated"}); n != before {
		t.Errorf("%v records refused, want %v", n, before)
	}
	if now := get(t, j).UID; now != uid {
		t.Errorf("Job replaced: %s -> %s", uid, now)
	}
}

// noRecords waits until no replacement record is left in ns.
func noRecords(t *testing.T, ns string) {
	t.Helper()
	testutil.Eventually(t, "no replacement record left", func() error {
		var records appsv1.ControllerRevisionList
		if err := k8s.List(context.Background(), &records, client.InNamespace(ns), client.HasLabels{controller.ReplacementLabel}); err != nil {
			return err
		}
		if n := len(records.Items); n > 0 {
			return fmt.Errorf("%d records", n)
		}
		return nil
	})
}

// signedRecords watches the records of ns, as anyone allowed to could, and returns the last
// signed one seen; the test fails if there is none by then.
func signedRecords(t *testing.T, ns string) func() *appsv1.ControllerRevision {
	t.Helper()
	var last *appsv1.ControllerRevision
	// The last state is all this keeps: a list made again after a gap in the watch has it.
	f := followObjects(t, &appsv1.ControllerRevisionList{}, follower.Config{Gaps: follower.GapLatest}, func(_ watch.EventType, o client.Object) {
		if rec, ok := o.(*appsv1.ControllerRevision); ok && rec.Annotations["reloader.dev/record-mac"] != "" {
			last = rec.DeepCopy()
		}
	}, client.InNamespace(ns), client.HasLabels{controller.ReplacementLabel})
	return func() *appsv1.ControllerRevision {
		t.Helper()
		f.Check(t)
		f.Lock()
		defer f.Unlock()
		if last == nil {
			t.Fatal("no signed record seen")
		}
		return last
	}
}
