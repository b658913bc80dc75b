package jobreplace

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/reloader-operator/reloader/internal/testutil"
)

// The informer hands dropRecordData a record its cache already holds (a re-list, the watch's
// deletion of it) while the controller reads that copy: the second pass writes nothing to it.
// make test runs this under -race.
func TestDropRecordDataSecondPassWritesNothing(t *testing.T) {
	for name, rec := range map[string]*appsv1.ControllerRevision{
		"record with foreign metadata": {ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "reloader-job-migrate",
			Labels:          map[string]string{ReplacementLabel: "Job", "other": "x"},
			Annotations:     map[string]string{replacesUIDAnnotation: "uid-1", replacesNameAnnotation: "migrate", recordMACAnnotation: "00", "note": "big"},
			OwnerReferences: []metav1.OwnerReference{{Name: "o"}}, Finalizers: []string{"f"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "reloader"}}},
			Data: runtime.RawExtension{Raw: []byte(`{"metadata":{"name":"migrate"}}`)}},
		"record of reloader's keys only": {ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "reloader-job-other",
			Labels:      map[string]string{ReplacementLabel: "Job"},
			Annotations: map[string]string{replacesUIDAnnotation: "uid-2"}}},
		"empty maps": {ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "empty", Labels: map[string]string{}, Annotations: map[string]string{}}},
	} {
		t.Run(name, func(t *testing.T) {
			got := testutil.SecondPass(t, dropRecordData, rec)
			if got.Data.Raw != nil || got.ManagedFields != nil || got.OwnerReferences != nil || got.Finalizers != nil ||
				len(got.Labels) > 1 || got.Annotations["note"] != "" || (got.Labels != nil && len(got.Labels) == 0) {
				t.Errorf("first pass kept more than the record's identity and reloader's keys: %+v", got.ObjectMeta)
			}
		})
	}
}
