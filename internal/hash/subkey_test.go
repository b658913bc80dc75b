package hash

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The install key keys Secret hashes and the sub-keys of MAC: no input of one may be an input
// of the other. A Secret hash input starts with its namespace's length (at most 63, one
// uvarint byte); a sub-key input with its purpose, which must start above 63.
func TestSubKeyInputsNeverStartLikeSecretHashes(t *testing.T) {
	secret := bytes.Repeat([]byte{7}, KeySize)
	k, _ := NewKey(secret)
	for _, ns := range []string{"a", strings.Repeat("n", maxNamespaceLen)} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, Data: map[string][]byte{"p": []byte("x")}}
		// The input as Secret writes it, spelled out: its first byte is the namespace length.
		var in []byte
		in = binary.AppendUvarint(in, uint64(len(ns)))
		in = append(in, ns...)
		in = binary.AppendUvarint(in, uint64(len(s.Name)))
		in = append(in, s.Name...)
		in = append(in, 'd')
		in = binary.AppendUvarint(in, 1)
		in = binary.AppendUvarint(in, 1)
		in = append(in, 'p')
		in = binary.AppendUvarint(in, 1)
		in = append(in, 'x')
		m := hmac.New(sha256.New, secret)
		m.Write(in)
		if want := k.ID() + keySeparator + hex.EncodeToString(m.Sum(nil)); Secret(k, s) != want {
			t.Fatalf("Secret hash input of namespace %q is not laid out as this test assumes", ns)
		}
		if in[0] > maxNamespaceLen {
			t.Errorf("Secret hash input of namespace %q starts with %d", ns, in[0])
		}
	}
	for _, purpose := range []string{"replacement-record", "records"} {
		if !purposeApart(purpose) {
			t.Errorf("purpose %q starts with %d", purpose, purpose[0])
		}
	}
	for _, purpose := range []string{"", "\x05ns", "?"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("MAC took purpose %q, which may start like a Secret hash input", purpose)
				}
			}()
			k.MAC(purpose, []byte("msg"))
		}()
	}
}
