package hashkey

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/reloader-operator/reloader/internal/hash"
)

// neverLoads is a key that never loads; own says where it lives (Loader.Own).
type neverLoads struct{ own bool }

func (neverLoads) Wait(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
func (neverLoads) Key() hash.Key                  { return hash.Key{} }
func (n neverLoads) Own() bool                    { return n.own }

// loaded is a loaded key kept outside reloader's own namespace.
type loaded struct{ key hash.Key }

func (loaded) Wait(context.Context) error { return nil }
func (l loaded) Key() hash.Key            { return l.key }
func (loaded) Own() bool                  { return false }

// A key that never loads holds a reconcile no longer than its context (and SigningWait): it is
// retried (ErrNotLoaded: a wait, not a failure), not blocked. A key outside reloader's own
// namespace signs and trusts nothing.
func TestSigning(t *testing.T) {
	var src Source = neverLoads{own: true}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := Signing(ctx, src); !errors.Is(err, ErrNotLoaded) || time.Since(start) > SigningWait {
		t.Errorf("key that never loads: %v after %s; want ErrNotLoaded when the context ends", err, time.Since(start))
	}
	start = time.Now()
	if _, err := Signing(context.Background(), src); !errors.Is(err, ErrNotLoaded) || time.Since(start) > 3*SigningWait {
		t.Errorf("key that never loads, no deadline: %v after %s; want ErrNotLoaded after %s", err, time.Since(start), SigningWait)
	}
	src = neverLoads{own: false}
	if k, err := Signing(ctx, src); err != nil || k.Valid() {
		t.Errorf("key outside reloader's namespace, not loaded: %v, valid %v; want no key and no wait", err, k.Valid())
	}
	key, _ := hash.NewKey(bytes.Repeat([]byte{7}, hash.KeySize))
	src = loaded{key}
	if k, err := Signing(context.Background(), src); err != nil || k.Valid() {
		t.Errorf("key outside reloader's namespace: %v, valid %v; want no key", err, k.Valid())
	}
	src = key
	if k, err := Signing(context.Background(), src); err != nil || !k.Valid() {
		t.Errorf("key given: %v, valid %v; want it", err, k.Valid())
	}
}
