package hashkey

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/reloader-operator/reloader/internal/hash"
)

// Source gives the install key once it is loaded: a hash.Key, or a Loader.
type Source interface {
	// Wait blocks until the key is loaded or ctx ends.
	Wait(ctx context.Context) error
	Key() hash.Key
}

// SigningWait bounds how long a reconcile waits for the install key to load before it is
// retried, rather than holding a worker.
const SigningWait = time.Second

// RetryEvery is how soon a reconcile that found the key not loaded (ErrNotLoaded) comes back:
// a wait at a steady pace, not a failure. A failure's exponential backoff grew past a minute
// while the key's Secret was refused, and the reload it held then waited that long after the
// key loaded.
const RetryEvery = time.Second

// owner is a Source that tells whether the key lives in reloader's own namespace (Loader).
type owner interface{ Own() bool }

// Signing is the install key that signs what reloader must trust back (Job replacement
// records, quarantine records), once loaded; not Valid when there is none (nil src), or when
// it lives outside reloader's own namespace (a run with --kubeconfig): whoever may read or
// create Secrets there could read it or plant one of their choosing, and sign a record that
// reloader would act on. ErrNotLoaded when the key has not loaded within SigningWait or ctx:
// the caller is retried (RetryEvery), not held.
func Signing(ctx context.Context, src Source) (hash.Key, error) {
	if src == nil {
		return hash.Key{}, nil
	}
	if o, ok := src.(owner); ok && !o.Own() {
		return hash.Key{}, nil
	}
	wait, cancel := context.WithTimeout(ctx, SigningWait)
	defer cancel()
	if err := src.Wait(wait); err != nil {
		if !errors.Is(err, ErrNotLoaded) {
			err = fmt.Errorf("%w: %w", ErrNotLoaded, err)
		}
		return hash.Key{}, err
	}
	return src.Key(), nil
}
