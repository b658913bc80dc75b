package jobreplace

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/workload"
)

// A record's MAC covers its data, the whole identity of what it replaces and its own UID: a
// change of any of them, or another key, makes it invalid.
func TestRecordMAC(t *testing.T) {
	key, _ := hash.NewKey(bytes.Repeat([]byte{7}, hash.KeySize))
	other, _ := hash.NewKey(bytes.Repeat([]byte{8}, hash.KeySize))
	data := []byte(`{"metadata":{"name":"migrate","namespace":"a"}}`)
	base := recordMAC(key, "Job", "a", "migrate", "uid-1", "rec-1", data)
	for name, mac := range map[string][]byte{
		"data":      recordMAC(key, "Job", "a", "migrate", "uid-1", "rec-1", []byte(`{"metadata":{"name":"migrate","namespace":"b"}}`)),
		"kind":      recordMAC(key, "CronJob", "a", "migrate", "uid-1", "rec-1", data),
		"namespace": recordMAC(key, "Job", "b", "migrate", "uid-1", "rec-1", data),
		"name":      recordMAC(key, "Job", "a", "migrate2", "uid-1", "rec-1", data),
		"uid":       recordMAC(key, "Job", "a", "migrate", "uid-2", "rec-1", data),
		// The same record created again: the API server gave the copy another UID.
		"record": recordMAC(key, "Job", "a", "migrate", "uid-1", "rec-2", data),
		// Fields moved across a boundary encode apart.
		"boundary": recordMAC(key, "Job", "am", "igrate", "uid-1", "rec-1", data),
		"key":      recordMAC(other, "Job", "a", "migrate", "uid-1", "rec-1", data),
	} {
		if bytes.Equal(base, mac) {
			t.Errorf("%s changed, MAC the same", name)
		}
	}
	if !bytes.Equal(base, recordMAC(key, "Job", "a", "migrate", "uid-1", "rec-1", data)) {
		t.Error("MAC not stable")
	}
	if recordMAC(hash.Key{}, "Job", "a", "migrate", "uid-1", "rec-1", data) != nil {
		t.Error("MAC without a valid key")
	}
}

func TestCheckRecord(t *testing.T) {
	key, _ := hash.NewKey(bytes.Repeat([]byte{7}, hash.KeySize))
	other, _ := hash.NewKey(bytes.Repeat([]byte{8}, hash.KeySize))
	record := func(jobNS, jobName string, sign hash.Key, change func(*appsv1.ControllerRevision)) *appsv1.ControllerRevision {
		data, _ := json.Marshal(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: jobNS, Name: jobName}})
		rec := &appsv1.ControllerRevision{
			ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "reloader-job-migrate", UID: "rec-1", Annotations: map[string]string{
				replacesNameAnnotation: "migrate", replacesUIDAnnotation: "uid-1"}},
			Data: runtime.RawExtension{Raw: data},
		}
		if mac := recordMAC(sign, "Job", "a", "migrate", "uid-1", "rec-1", data); mac != nil {
			rec.Annotations[recordMACAnnotation] = hex.EncodeToString(mac)
		}
		if change != nil {
			change(rec)
		}
		return rec
	}
	tests := []struct {
		name   string
		key    hash.Key
		rec    *appsv1.ControllerRevision
		refuse string
	}{
		{"genuine", key, record("a", "migrate", key, nil), ""},
		{"no MAC", key, record("a", "migrate", hash.Key{}, nil), refusedUnauthenticated},
		{"another key's MAC", key, record("a", "migrate", other, nil), refusedUnauthenticated},
		{"MAC not hex", key, record("a", "migrate", key, func(r *appsv1.ControllerRevision) { r.Annotations[recordMACAnnotation] = "zz" }), refusedUnauthenticated},
		{"no valid key here", hash.Key{}, record("a", "migrate", key, nil), refusedUnauthenticated},
		{"data changed", key, record("a", "migrate", key, func(r *appsv1.ControllerRevision) {
			r.Data.Raw = bytes.Replace(r.Data.Raw, []byte(`"migrate"`), []byte(`"migrat3"`), 1)
		}), refusedUnauthenticated},
		{"replaced UID changed", key, record("a", "migrate", key, func(r *appsv1.ControllerRevision) { r.Annotations[replacesUIDAnnotation] = "uid-2" }), refusedUnauthenticated},
		{"created again (another record UID)", key, record("a", "migrate", key, func(r *appsv1.ControllerRevision) { r.UID = "rec-2" }), refusedUnauthenticated},
		{"moved to another namespace", key, record("a", "migrate", key, func(r *appsv1.ControllerRevision) { r.Namespace = "b" }), refusedUnauthenticated},
		{"data in another namespace, signed", key, record("kube-system", "migrate", key, nil), refusedMisplaced},
		{"data under another name, signed", key, record("a", "other", key, nil), refusedMisplaced},
		{"oversized", key, record("a", "migrate", key, func(r *appsv1.ControllerRevision) { r.Data.Raw = make([]byte, maxRecordData+1) }), refusedOversized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj, refused := checkRecord(tt.key, workload.Job(), tt.rec)
			switch {
			case tt.refuse == "" && refused != nil:
				t.Fatalf("refused: %v", refused)
			case tt.refuse == "" && (obj.GetNamespace() != "a" || obj.GetName() != "migrate"):
				t.Fatalf("object %s/%s", obj.GetNamespace(), obj.GetName())
			case tt.refuse != "" && (refused == nil || refused.reason != tt.refuse):
				t.Fatalf("refused %v, want %s", refused, tt.refuse)
			case tt.refuse != "" && obj != nil:
				t.Fatalf("refused, yet object %v", obj)
			}
		})
	}
}

// Only a record named as reloader names the record of the object it says it replaces stands
// for that object's replacement; another is refused as misnamed.
func TestRecordOfNeedsItsOwnName(t *testing.T) {
	r := &Writer{Kind: workload.Job()}
	rec := func(name, replaces string) *appsv1.ControllerRevision {
		return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name, UID: "rec-1",
			Labels:      map[string]string{ReplacementLabel: "Job"},
			Annotations: map[string]string{replacesNameAnnotation: replaces, replacesUIDAnnotation: "uid-1"}}}
	}
	long := strings.Repeat("j", 250)
	for _, tc := range []struct {
		rec          *appsv1.ControllerRevision
		ok, misnamed bool
	}{
		{rec("reloader-job-migrate", "migrate"), true, false},
		{rec(recordName("Job", long), long), true, false},
		{rec("x", "migrate"), false, true},
		{rec("reloader-job-other", "migrate"), false, true},
		{rec("reloader-job-", ""), false, true},
	} {
		nn, p, ok, misnamed := r.recordOf(tc.rec)
		if ok != tc.ok || (misnamed != nil) != tc.misnamed || (misnamed != nil && misnamed.reason != refusedMisnamed) {
			t.Errorf("%s replacing %q: ok %v, misnamed %v", tc.rec.Name, tc.rec.Annotations[replacesNameAnnotation], ok, misnamed)
		}
		if ok && (nn.Name != tc.rec.Annotations[replacesNameAnnotation] || p.record != "rec-1" || p.replaces != "uid-1") {
			t.Errorf("%s: %v %+v", tc.rec.Name, nn, p)
		}
	}
	other := rec("reloader-cronjob-migrate", "migrate")
	other.Labels[ReplacementLabel] = "CronJob"
	if _, _, ok, misnamed := r.recordOf(other); ok || misnamed != nil {
		t.Errorf("record of another kind: ok %v, misnamed %v", ok, misnamed)
	}
}

// A replacement this process holds whole is never displaced by what the cache shows of
// another record of the same name.
func TestLearnKeepsWhatIsHeldWhole(t *testing.T) {
	nn := types.NamespacedName{Namespace: "a", Name: "migrate"}
	var p pendingJobs
	mine := pendingJob{obj: &batchv1.Job{}, replaces: "uid-1", record: "rec-1"}
	p.put(nn, mine)
	p.learn(nn, pendingJob{replaces: "uid-1", record: "forged"})
	if got, _ := p.get(nn); got.record != "rec-1" || got.obj == nil {
		t.Errorf("held replacement displaced: %+v", got)
	}
	p.put(nn, pendingJob{replaces: "uid-1", record: "rec-2", drop: true})
	p.learn(nn, pendingJob{replaces: "uid-1", record: "forged"})
	if got, _ := p.get(nn); got.record != "rec-2" || !got.drop {
		t.Errorf("replacement marked to drop displaced: %+v", got)
	}
	p.put(nn, pendingJob{replaces: "uid-1", record: "seen"})
	p.learn(nn, pendingJob{replaces: "uid-2", record: "newer"})
	if got, _ := p.get(nn); got.record != "newer" {
		t.Errorf("record seen through the cache only not replaced by a newer one: %+v", got)
	}
}
