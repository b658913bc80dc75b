package hash

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// KeySize is the length of an install key, in bytes.
const KeySize = 32

// keySeparator ends the key ID at the start of a keyed hash. Hex digests never contain it.
const keySeparator = ":"

// Key is the secret key of Secret hashes, shared by every replica of an install. Its bytes
// never leave it: String and the ID say only which key it is.
type Key struct {
	id     string
	secret []byte
}

// NewKey wraps KeySize random bytes. The ID is a digest of them: it names the key without
// revealing it.
func NewKey(secret []byte) (Key, error) {
	if len(secret) != KeySize {
		return Key{}, fmt.Errorf("hash key is %d bytes, want %d", len(secret), KeySize)
	}
	sum := sha256.Sum256(append([]byte("reloader hash key id\x00"), secret...))
	return Key{id: hex.EncodeToString(sum[:4]), secret: append([]byte(nil), secret...)}, nil
}

// ID names the key in the hashes it makes.
func (k Key) ID() string { return k.id }

// String names the key without its bytes, so that printing one by mistake leaks nothing.
func (k Key) String() string { return "hash.Key(" + k.id + ")" }

// GoString is String, for %#v.
func (k Key) GoString() string { return k.String() }

// Wait returns at once: a Key is already loaded (see hashkey.Loader).
func (k Key) Wait(context.Context) error { return nil }

// Key returns k.
func (k Key) Key() Key { return k }

// Valid reports whether the key was made by NewKey.
func (k Key) Valid() bool { return len(k.secret) == KeySize }

// KeyID returns the ID of the key a Secret hash was made with; keyed is false for a hash of
// the UID-keyed scheme (UIDKeyedSecret), and for anything else without a key ID.
func KeyID(h string) (id string, keyed bool) {
	id, _, keyed = strings.Cut(h, keySeparator)
	return id, keyed
}

// MAC authenticates msg under the key for one purpose: HMAC-SHA256 keyed with a sub-key
// HMAC(key, purpose), so that a MAC made for one use is never valid for another. It returns
// nil when the key is not Valid: nothing is authenticated without one.
//
// The install key also keys Secret hashes directly (Secret, SecretKeys), so a sub-key must
// never equal a Secret hash made under the same key. It can't: the input of a Secret hash
// starts with the length of the Secret's namespace as a uvarint, a single byte of at most 63
// (a namespace is a DNS label), while the input of a sub-key is the purpose, whose first byte
// MAC requires to be above 63 (a lowercase letter: "replacement-record" starts with 'r',
// 114). TestSubKeyInputsNeverStartLikeSecretHashes pins both.
func (k Key) MAC(purpose string, msg []byte) []byte {
	if !k.Valid() {
		return nil
	}
	if !purposeApart(purpose) {
		panic("hash: MAC purpose " + strconv.Quote(purpose) + " must start with a byte above 63, apart from Secret hash inputs")
	}
	sub := hmac.New(sha256.New, k.secret)
	sub.Write([]byte(purpose))
	m := hmac.New(sha256.New, sub.Sum(nil))
	m.Write(msg)
	return m.Sum(nil)
}

// maxNamespaceLen is the longest namespace name (a DNS label): the first byte of a Secret
// hash input is at most this.
const maxNamespaceLen = 63

// purposeApart reports whether a sub-key's input, purpose, starts unlike any Secret hash input.
func purposeApart(purpose string) bool {
	return purpose != "" && purpose[0] > maxNamespaceLen
}
