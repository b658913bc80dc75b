package hash

import (
	"bytes"
	"testing"
)

func TestMACIsPerKeyAndPurpose(t *testing.T) {
	k1, _ := NewKey(bytes.Repeat([]byte{1}, KeySize))
	k2, _ := NewKey(bytes.Repeat([]byte{2}, KeySize))
	base := k1.MAC("records", []byte("msg"))
	if len(base) != 32 || !bytes.Equal(base, k1.MAC("records", []byte("msg"))) {
		t.Fatalf("MAC %x: want 32 bytes, the same each time", base)
	}
	for name, other := range map[string][]byte{
		"another message": k1.MAC("records", []byte("msh")),
		"another purpose": k1.MAC("hashes", []byte("msg")),
		"another key":     k2.MAC("records", []byte("msg")),
	} {
		if bytes.Equal(base, other) {
			t.Errorf("%s: same MAC", name)
		}
	}
	if m := (Key{}).MAC("records", []byte("msg")); m != nil {
		t.Errorf("a key that is not valid made MAC %x", m)
	}
}
