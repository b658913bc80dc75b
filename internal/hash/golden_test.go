package hash

import (
	"bytes"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestHashesArePinned: the hashes recorded on workloads by earlier releases must come out the
// same, whatever way the bytes are fed to the hash (a change here rolls every workload).
func TestHashesArePinned(t *testing.T) {
	big := map[string]string{}
	for i := range 5000 {
		big[fmt.Sprintf("key-%d", i)] = fmt.Sprint(i)
	}
	k, err := NewKey(bytes.Repeat([]byte{7}, KeySize))
	if err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "u1"},
		Data: map[string][]byte{"password": []byte("hunter2"), "user": []byte("app")}}
	for name, tc := range map[string]struct{ got, want string }{
		"ConfigMap":        {ConfigMap(&corev1.ConfigMap{Data: map[string]string{"a": "1", "b": "2"}, BinaryData: map[string][]byte{"c": {0, 1}}}), "c7dc0d9baa8c1c2367e665ca9b851b7e817266d34bbc94c6c699b52ba3fe4c74"},
		"large ConfigMap":  {ConfigMap(&corev1.ConfigMap{Data: big}), "5de9561be8726841e8550faca3d98c2c00ae7b14fbedae399e7648933c18610e"},
		"Secret":           {Secret(k, s), "7c69966d:430a8c1fd2799028cb5110de954c05b96e90a1c03db9ea74170de4304d791038"},
		"UID-keyed Secret": {UIDKeyedSecret(s), "e2379078b3e9bbe61d7975bf59cf291f038c6b30c694f3630ed7ffc1e40bd687"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s hashes to %s, want %s", name, tc.got, tc.want)
		}
	}
}
