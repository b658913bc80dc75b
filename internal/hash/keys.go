package hash

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// digestBytes is the length of a per-key digest before hex encoding: 128 bits keep
// collisions out of reach while a cached ConfigMap holds 32 characters per key.
const digestBytes = 16

// ConfigMapKeys returns a short digest of each key's value, data and binaryData together.
// The section is part of the digest, as in ConfigMap: a value moved between them changed.
func ConfigMapKeys(cm *corev1.ConfigMap) map[string]string {
	out := make(map[string]string, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		out[k] = keyDigest(sha256.New(), 'd', k, v)
	}
	for k, v := range cm.BinaryData {
		out[k] = keyDigest(sha256.New(), 'b', k, v)
	}
	return out
}

// SecretKeys returns a short digest of each key's value, keyed like Secret: an HMAC under the
// install's key of namespace, name, key and value, so that no digest can be brute-forced
// without the key. Without a key it is keyed by the Secret's UID, as UIDKeyedSecret is.
func SecretKeys(k Key, s *corev1.Secret) map[string]string {
	mac := func() hash.Hash {
		if !k.Valid() {
			return hmac.New(sha256.New, []byte(s.UID))
		}
		h := hmac.New(sha256.New, k.secret)
		writeString(h, s.Namespace)
		writeString(h, s.Name)
		return h
	}
	out := make(map[string]string, len(s.Data))
	for key, v := range s.Data {
		out[key] = keyDigest(mac(), 'd', key, v)
	}
	return out
}

func keyDigest[V ~string | ~[]byte](h hash.Hash, tag byte, key string, v V) string {
	h.Write([]byte{tag})
	writeString(h, key)
	writeLen(h, len(v))
	h.Write([]byte(v))
	return hex.EncodeToString(h.Sum(nil)[:digestBytes])
}

// subsetMark starts the part of a subset hash that follows the key ID: no whole-content hash
// (hex, or a CSI mount's comma-separated hex) starts with it.
const subsetMark = "keys."

// Subset returns the hash of the named keys of a source, from the per-key digests of
// ConfigMapKeys or SecretKeys. A key the source lacks counts as absent, which differs from
// an empty value. whole is the hash of the whole content computed with the digests: a
// Secret's key ID is taken from it, so that the subset hash is re-based like the whole one
// when the install key changes (see KeyID).
//
// The form is "[<key id>:]keys.<key set>.<hex>", where <key set> is a short fingerprint of
// the names of the keys (KeySet), so that a change of the key set is told from a change of
// content.
func Subset(whole string, digests map[string]string, keys []string) string {
	keys = slices.Compact(slices.Sorted(slices.Values(keys)))
	h := sha256.New()
	writeLen(h, len(keys))
	for _, k := range keys {
		writeString(h, k)
		d, ok := digests[k]
		if !ok {
			h.Write([]byte{0})
			continue
		}
		h.Write([]byte{1})
		writeString(h, d)
	}
	var prefix string
	if id, keyed := KeyID(whole); keyed {
		prefix = id + keySeparator
	}
	return prefix + subsetMark + keySetPrint(keys) + "." + hex.EncodeToString(h.Sum(nil))
}

// keySetPrint is a fingerprint of sorted, distinct key names.
func keySetPrint(keys []string) string {
	h := sha256.New()
	for _, k := range keys {
		writeString(h, k)
	}
	return hex.EncodeToString(h.Sum(nil)[:4])
}

// KeySet returns the fingerprint of the key set a hash covers, and "" for a hash of the whole
// content. Two hashes with different key sets measure different things: comparing them says
// nothing about a change of content.
func KeySet(h string) string {
	if _, rest, keyed := strings.Cut(h, keySeparator); keyed {
		h = rest
	}
	rest, ok := strings.CutPrefix(h, subsetMark)
	if !ok {
		return ""
	}
	fp, _, _ := strings.Cut(rest, ".")
	return fp
}
