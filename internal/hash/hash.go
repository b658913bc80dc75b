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
	"unsafe"

	corev1 "k8s.io/api/core/v1"
)

// ConfigMap returns the SHA-256 of a ConfigMap's data and binaryData.
func ConfigMap(cm *corev1.ConfigMap) string {
	h := sha256.New()
	writeSection(h, 'd', cm.Data)
	writeSection(h, 'b', cm.BinaryData)
	return hex.EncodeToString(h.Sum(nil))
}

// Secret returns an HMAC-SHA256 of a Secret's namespace, name and data under the install's
// key, prefixed by the key's ID ("<id>:<hex>").
//
// The hash ends up in pod templates, which more people can read than Secrets: a plain hash of
// a short password could be brute-forced from it. The key is random and kept in a Secret only
// reloader reads. Namespace and name are hashed too, so two Secrets holding the same password
// can't be told apart by their hashes. The ID prefix tells which key made a recorded hash, so
// that a hash from another key is re-based rather than compared (see KeyID).
//
// Without a key (an install whose RBAC gives no access to the key's Secret, such as upstream's)
// it falls back to UIDKeyedSecret, the scheme of releases before the install key.
func Secret(k Key, s *corev1.Secret) string {
	if !k.Valid() {
		return UIDKeyedSecret(s)
	}
	h := hmac.New(sha256.New, k.secret)
	writeString(h, s.Namespace)
	writeString(h, s.Name)
	writeSection(h, 'd', s.Data)
	return k.id + keySeparator + hex.EncodeToString(h.Sum(nil))
}

// UIDKeyedSecret is the Secret hash of releases before the install key: an HMAC of the data
// keyed by the Secret's UID, with no key ID. It is computed only to upgrade records written
// by those releases without a rollout.
func UIDKeyedSecret(s *corev1.Secret) string {
	h := hmac.New(sha256.New, []byte(s.UID))
	writeSection(h, 'd', s.Data)
	return hex.EncodeToString(h.Sum(nil))
}

func writeString(h hash.Hash, s string) {
	writeLen(h, len(s))
	h.Write(bytesOf(s))
}

// bytesOf is v as bytes without a copy, for h.Write only: a hash neither keeps nor changes
// what it is given (io.Writer's contract), and converting a 10 KiB value was a 10 KiB
// allocation per key per hash (a quarter of what start-up allocated over 6,000 sources).
func bytesOf[V ~string | ~[]byte](v V) []byte {
	switch x := any(v).(type) {
	case string:
		return unsafe.Slice(unsafe.StringData(x), len(x))
	case []byte:
		return x
	}
	return []byte(v) // a named type: copied
}

// directValue is the length from which a value goes to the hash as it is, not through
// writeSection's block: copying it there would cost as much as hashing it.
const directValue = 512

// writeSection writes a tag, then each key and value in key order, each prefixed by its
// length, so that no two different maps produce the same byte stream. The small pieces are
// gathered into blocks before they reach h: a source of 150,000 short keys is one map
// lookup and a few appends per key, not four calls of h.Write (and their allocations).
func writeSection[V ~string | ~[]byte](h hash.Hash, tag byte, m map[string]V) {
	// The block is only as large as the section, up to sectionBlock: each change of a small
	// ConfigMap is hashed, and a 32 KiB block for a few hundred bytes was most of what a
	// reload allocated.
	// Values of directValue bytes or more go to h directly: the block holds the rest.
	size := 1 + binary.MaxVarintLen64
	keys := make([]string, 0, len(m))
	for k, v := range m {
		keys = append(keys, k)
		size += len(k) + 2*binary.MaxVarintLen64
		if len(v) < directValue {
			size += len(v)
		}
	}
	buf := make([]byte, 0, min(size, sectionBlock+2*binary.MaxVarintLen64))
	buf = append(buf, tag)
	buf = binary.AppendUvarint(buf, uint64(len(m)))
	slices.Sort(keys)
	for _, k := range keys {
		v := m[k]
		buf = binary.AppendUvarint(buf, uint64(len(k)))
		buf = append(buf, k...)
		buf = binary.AppendUvarint(buf, uint64(len(v)))
		if len(v) >= directValue {
			h.Write(buf)
			buf = buf[:0]
			h.Write(bytesOf(v))
			continue
		}
		if len(buf)+len(v) > sectionBlock {
			h.Write(buf)
			buf = buf[:0]
		}
		buf = append(buf, v...)
	}
	h.Write(buf)
}

// sectionBlock is the size of the blocks writeSection gathers.
const sectionBlock = 32 << 10

func writeLen(h hash.Hash, n int) {
	var b [binary.MaxVarintLen64]byte
	h.Write(b[:binary.PutUvarint(b[:], uint64(n))])
}
