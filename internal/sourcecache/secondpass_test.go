package sourcecache

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/cachemem/intern"
	"github.com/reloader-operator/reloader/internal/extapi"
	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/workload"
)

// The informer hands Transform a source its cache already holds (a re-list during a shard
// hand-over, the watch's deletion of it) while handlers read that copy (mapping a source to
// its workloads reads its labels): the second pass writes nothing to it, labels kept or
// dropped, strings interned or not. make test runs this under -race.
func TestTransformSecondPassWritesNothing(t *testing.T) {
	key, err := hash.NewKey(make([]byte, hash.KeySize))
	testutil.Must(t, err)
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "shop", Name: name, UID: "u1", ResourceVersion: "7",
			Labels:        map[string]string{"app": "web", "team": "shop"},
			Annotations:   map[string]string{workload.LastAppliedAnnotation: `{"data":{"k":"v"}}`, "owner": "shop"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}}}
	}
	for _, c := range []struct {
		st  SourceType
		obj client.Object
	}{
		{ConfigMaps, &corev1.ConfigMap{ObjectMeta: meta("c"), Data: map[string]string{"k": "v"}, BinaryData: map[string][]byte{"b": {1}}}},
		{Secrets(key), &corev1.Secret{ObjectMeta: meta("s"), Data: map[string][]byte{"p": []byte("x")}}},
		{CSIMounts, &extapi.SecretProviderClassPodStatus{ObjectMeta: meta("m"),
			Status: extapi.SecretProviderClassPodStatusStatus{SecretProviderClassName: "spc", Objects: []extapi.SecretProviderClassObject{{ID: "a", Version: "1"}}}}},
	} {
		for _, drop := range []bool{false, true} {
			for _, tables := range []*intern.Tables{nil, intern.New()} {
				t.Run(fmt.Sprintf("%s, DropLabels %v, interned %v", c.st.Kind, drop, tables != nil), func(t *testing.T) {
					st := c.st
					st.DropLabels, st.Intern = drop, tables
					got := testutil.SecondPass(t, st.Transform, c.obj.DeepCopyObject().(client.Object))
					if !FromCache(got) || got.GetManagedFields() != nil || (got.GetLabels() == nil) != drop {
						t.Errorf("first pass: mark %v, managed fields %v, labels %v", FromCache(got), got.GetManagedFields(), got.GetLabels())
					}
				})
			}
		}
	}
}
