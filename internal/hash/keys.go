package hash

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"iter"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// digestBytes is the length of a per-key digest before hex encoding: 128 bits keep
// collisions out of reach while a cached ConfigMap holds 32 characters per key.
const digestBytes = 16

// A source's per-key digests are kept in reloader's cache in place of its content, and
// computed in the informer's transform, under the lock that every event of the kind waits on.
// Both grow with the number of keys, not with the bytes: a 1.35 MB ConfigMap of 150,000
// short keys cost 5.5 MB of digests and over a second of hashing. So a source gets per-key
// digests only while it has at most MaxKeyDigests keys and they take at most
// MaxKeyDigestBytes (DigestCost per key); beyond either, only the whole content is hashed,
// and the source is over the cap (OverCap): a workload that reads some of its keys reloads
// on any change of it (SubsetOfWhole), and reports name none of its keys.
//
// 1,000 keys is well past any ConfigMap or Secret written by hand (tens of keys), and keeps
// the work per event to about a millisecond of hashing; 64 KiB bounds what one source costs
// in the cache whatever its key names' lengths (up to 253 bytes each). A constant, not a
// flag: reloader explain, plan and the webhook hash sources the same way as the controller,
// and must agree with it without being told its flags.
const (
	MaxKeyDigests     = 1000
	MaxKeyDigestBytes = 64 << 10
)

// DigestCost is what one key's digest costs in the cache, beside its name: the hex digest and
// two separators.
const DigestCost = 2*digestBytes + 2

// overCap reports whether n keys whose names are names get no per-key digests. The names
// are read only when the count is within bounds, and then at most MaxKeyDigests of them.
func overCap(n int, names ...iter.Seq[string]) bool {
	if n > MaxKeyDigests {
		return true
	}
	size := n * DigestCost
	for _, seq := range names {
		for k := range seq {
			size += len(k)
		}
	}
	return size > MaxKeyDigestBytes
}

// ConfigMapOverCap reports whether a ConfigMap has too many keys for per-key digests.
func ConfigMapOverCap(cm *corev1.ConfigMap) bool {
	return overCap(len(cm.Data)+len(cm.BinaryData), maps.Keys(cm.Data), maps.Keys(cm.BinaryData))
}

// SecretOverCap reports whether a Secret has too many keys for per-key digests.
func SecretOverCap(s *corev1.Secret) bool { return overCap(len(s.Data), maps.Keys(s.Data)) }

// ConfigMapKeys returns a short digest of each key's value, data and binaryData together; nil
// when the ConfigMap is over the cap (ConfigMapOverCap), and never nil otherwise.
// The section is part of the digest, as in ConfigMap: a value moved between them changed.
func ConfigMapKeys(cm *corev1.ConfigMap) map[string]string {
	if ConfigMapOverCap(cm) {
		return nil
	}
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
// without the key. Without a key it is keyed by the Secret's UID, as UIDKeyedSecret is. nil
// when the Secret is over the cap (SecretOverCap), and never nil otherwise.
func SecretKeys(k Key, s *corev1.Secret) map[string]string {
	if SecretOverCap(s) {
		return nil
	}
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
	h.Write(bytesOf(v))
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

// SubsetOfWhole stands for Subset for a source over the cap, whose per-key digests are not
// kept: the hash of the named keys taken as the whole content, so that it changes with any
// change of the content (a change of other keys too: a reload more, never one fewer). It
// keeps Subset's form and key set fingerprint, so that a source that crosses the cap in
// either direction compares as the same key set with a changed content, and reloads.
func SubsetOfWhole(whole string, keys []string) string {
	keys = slices.Compact(slices.Sorted(slices.Values(keys)))
	h := sha256.New()
	h.Write([]byte("whole"))
	writeString(h, whole)
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
