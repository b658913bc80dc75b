package writer

import (
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Conflict retries back off here rather than in controller-runtime's rate limiter: a result
// with RequeueAfter makes it Forget the item, so its backoff would never grow, and
// Result.Requeue, which does not Forget, is deprecated. The first retry comes soon (long
// enough for the cache to hear of the newer version in most cases), later ones slower, so a
// conflict that persists (a tenant patching the object over and over) is no hot loop.
const (
	conflictRetry    = 100 * time.Millisecond
	conflictRetryMax = 30 * time.Second
	// ConflictsLogged is how many conflicts in a row for one workload make an info log line.
	ConflictsLogged = 5
)

// Conflicts counts, per workload, the reconciles in a row that met a conflict.
type Conflicts struct {
	mu sync.Mutex
	n  map[types.NamespacedName]int
}

// Retry classifies the error of a reconcile of nn: when it is a conflict (409) and
// nothing else, a stale copy was read, which is expected with a cache; the reconcile runs
// again, after a delay that doubles with each conflict in a row, instead of returning an
// error (and an error log line). It returns how many conflicts in a row nn has met; any
// other outcome resets the count.
func (c *Conflicts) Retry(nn types.NamespacedName, err error) (res reconcile.Result, inRow int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil || !onlyConflicts(err) {
		delete(c.n, nn)
		return reconcile.Result{}, 0, false
	}
	if c.n == nil {
		c.n = map[types.NamespacedName]int{}
	}
	c.n[nn]++
	inRow = c.n[nn]
	delay := conflictRetryMax
	if shift := inRow - 1; shift < 16 {
		delay = min(conflictRetry<<shift, conflictRetryMax)
	}
	return reconcile.Result{RequeueAfter: delay}, inRow, true
}

// onlyConflicts tells whether err is a conflict and only that: every error joined in it
// (errors.Join, fmt.Errorf with several %w) must be one, so that a failed write or cleanup
// reported together with a conflict still surfaces as an error.
func onlyConflicts(err error) bool {
	if _, ok := err.(apierrors.APIStatus); ok {
		return apierrors.IsConflict(err)
	}
	switch e := err.(type) {
	case interface{ Unwrap() []error }:
		errs := e.Unwrap()
		for _, err := range errs {
			if err == nil || !onlyConflicts(err) {
				return false
			}
		}
		return len(errs) > 0
	case interface{ Unwrap() error }:
		if inner := e.Unwrap(); inner != nil {
			return onlyConflicts(inner)
		}
	}
	return false
}
