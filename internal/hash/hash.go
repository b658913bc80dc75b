// Package hash computes the content hashes that decide whether a source changed.
//
// Only content counts: ConfigMap data and binaryData, Secret data. Metadata never does, so a
// label edit or a re-apply of identical data never reloads.
package hash

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// ConfigMap returns the SHA-256 of a ConfigMap's data and binaryData.
func ConfigMap(cm *corev1.ConfigMap) string {
	h := sha256.New()
	writeSection(h, 'd', cm.Data)
	writeSection(h, 'b', cm.BinaryData)
	return hex.EncodeToString(h.Sum(nil))
}

// Secret returns an HMAC-SHA256 of a Secret's data, keyed by the Secret's UID.
//
// The hash ends up in pod templates, which more people can read than Secrets. A plain hash
// of a short password can be brute-forced from it; the UID is a 122-bit random key known only
// to those who can read the Secret itself.
func Secret(s *corev1.Secret) string {
	h := hmac.New(sha256.New, []byte(s.UID))
	writeSection(h, 'd', s.Data)
	return hex.EncodeToString(h.Sum(nil))
}

// writeSection writes a tag, then each key and value in key order, each prefixed by its
// length, so that no two different maps produce the same byte stream.
func writeSection[V ~string | ~[]byte](h hash.Hash, tag byte, m map[string]V) {
	h.Write([]byte{tag})
	writeLen(h, len(m))
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		writeLen(h, len(k))
		h.Write([]byte(k))
		v := m[k]
		writeLen(h, len(v))
		h.Write([]byte(v))
	}
}

func writeLen(h hash.Hash, n int) {
	var b [binary.MaxVarintLen64]byte
	h.Write(b[:binary.PutUvarint(b[:], uint64(n))])
}
