package hash

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
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

// TestLargeValuesAndKeyDigestsArePinned: values long enough to go to the hash apart from the
// small pieces around them (10 KiB, 40 KiB: past a block), and the per-key digests, come out
// as the releases that wrote them computed them.
func TestLargeValuesAndKeyDigestsArePinned(t *testing.T) {
	k, err := NewKey(bytes.Repeat([]byte{7}, KeySize))
	if err != nil {
		t.Fatal(err)
	}
	ten, forty := strings.Repeat("0123456789", 1024), strings.Repeat("abcdefghij", 4096)
	cm := &corev1.ConfigMap{Data: map[string]string{"a": "1", "ten": ten, "forty": forty, "z": "small"},
		BinaryData: map[string][]byte{"bin": []byte(ten), "c": {0, 1}}}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "u1"},
		Data: map[string][]byte{"password": []byte("hunter2"), "cert": []byte(forty), "key": []byte(ten)}}
	cmKeys, secretKeys, uidKeys := ConfigMapKeys(cm), SecretKeys(k, s), SecretKeys(Key{}, s)
	for name, tc := range map[string]struct{ got, want string }{
		"ConfigMap":            {ConfigMap(cm), "e8b227e42b7d4737f740547cbc7d9592613ee47069b2c5e03b4ee3e9e0404627"},
		"Secret":               {Secret(k, s), "7c69966d:c5b3ed32bc343603c954a250a79398bf13ac60bde0e16e5af876d4cc488d910d"},
		"UID-keyed Secret":     {UIDKeyedSecret(s), "45def9c0f2d32c6aa325ab38657bae0948fefd3341084b8a56ba28b84245d158"},
		"ConfigMap key ten":    {cmKeys["ten"], "01b4d20c815ffa81e69a7eafa095fc4a"},
		"ConfigMap key forty":  {cmKeys["forty"], "c7758194f1475e9c7277907118ba0115"},
		"ConfigMap key bin":    {cmKeys["bin"], "da9b8216d8a7bf1ea074a3f01aaf9315"},
		"ConfigMap key a":      {cmKeys["a"], "80585f41425618fddc9c820b3f481359"},
		"Secret key cert":      {secretKeys["cert"], "301223e22d1c938120c0ace3237f92a4"},
		"Secret key password":  {secretKeys["password"], "9e40cfad41fb03b25e53ebc2281fbf71"},
		"UID-keyed Secret key": {uidKeys["key"], "a8692408b7e3619b9909af828c2380f1"},
		"subset of ConfigMap":  {Subset(ConfigMap(cm), cmKeys, []string{"ten", "a"}), "keys.c4dcae1f.336b6d42c9429243ed27e2088abfb497ece1eb4f1f8fd06e5da1ce808bb0410a"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s hashes to %s, want %s", name, tc.got, tc.want)
		}
	}
}

// TestHashingCopiesNoValue: a ConfigMap of ten 10 KiB values is hashed, whole and per key,
// without copying them (values of 512 bytes or more go to the hash as they are; each copy was
// 10 KiB allocated per key per hash): what is allocated is the keys, the digests and the hash
// states, far below one value.
func TestHashingCopiesNoValue(t *testing.T) {
	cm := &corev1.ConfigMap{Data: map[string]string{}}
	for i := range 10 {
		cm.Data[fmt.Sprintf("file-%d", i)] = strings.Repeat(fmt.Sprint(i), 10<<10)
	}
	const runs = 50
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		_ = ConfigMap(cm)
		_ = ConfigMapKeys(cm)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 8<<10 {
		t.Errorf("hashing a ConfigMap of ten 10 KiB values allocated %d bytes, want under 8 KiB: a value was copied", per)
	}
}

func BenchmarkConfigMapKeys(b *testing.B) {
	cm := &corev1.ConfigMap{Data: map[string]string{}}
	for i := range 10 {
		cm.Data[fmt.Sprintf("file-%d", i)] = strings.Repeat(fmt.Sprint(i), 10<<10)
	}
	b.ReportAllocs()
	b.SetBytes(100 << 10)
	for b.Loop() {
		_ = ConfigMap(cm)
		_ = ConfigMapKeys(cm)
	}
}
