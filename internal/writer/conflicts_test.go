package writer

import (
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

func TestRetryConflict(t *testing.T) {
	deployments := schema.GroupResource{Group: "apps", Resource: "deployments"}
	conflict := apierrors.NewConflict(deployments, "web", errors.New("the object has been modified"))
	other := apierrors.NewConflict(deployments, "web-2", errors.New("the object has been modified"))
	for _, tc := range []struct {
		name  string
		err   error
		retry bool
	}{
		{"no error", nil, false},
		{"conflict", conflict, true},
		{"wrapped conflict", fmt.Errorf("write Deployment/ns/web: %w", conflict), true},
		{"joined conflicts", errors.Join(conflict, fmt.Errorf("cleanup: %w", other)), true},
		{"two conflicts in one wrapper", fmt.Errorf("%w; %w", conflict, other), true},
		{"joined with another", errors.Join(errors.New("cleanup failed"), conflict), false},
		{"conflict joined with a server error", errors.Join(conflict, apierrors.NewInternalError(errors.New("etcd"))), false},
		{"wrapped join with another", fmt.Errorf("replace: %w", errors.Join(conflict, errors.New("delete failed"))), false},
		{"empty join", errors.Join(nil, nil), false},
		{"not found", apierrors.NewNotFound(deployments, "web"), false},
		{"server error", apierrors.NewInternalError(errors.New("etcd")), false},
		{"plain error", errors.New("boom"), false},
	} {
		var c Conflicts
		res, n, ok := c.Retry(types.NamespacedName{Namespace: "ns", Name: "web"}, tc.err)
		if ok != tc.retry || (ok && (res.RequeueAfter != conflictRetry || n != 1)) || (!ok && !res.IsZero()) {
			t.Errorf("%s: retry %v, %+v, %d in a row; want retry %v", tc.name, ok, res, n, tc.retry)
		}
	}
}

// Conflicts in a row for one workload wait longer each time, up to a bound; another outcome
// starts over, and other workloads count on their own.
func TestConflictRetriesBackOff(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "jobs"}, "j", errors.New("modified"))
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	var c Conflicts
	var last time.Duration
	for i := 1; i <= 40; i++ {
		res, n, ok := c.Retry(a, conflict)
		if !ok || n != i {
			t.Fatalf("conflict %d: retry %v, %d in a row", i, ok, n)
		}
		switch d := res.RequeueAfter; {
		case d > conflictRetryMax:
			t.Fatalf("conflict %d: retry in %v, over the bound %v", i, d, conflictRetryMax)
		case i > 1 && d <= last && d != conflictRetryMax:
			t.Fatalf("conflict %d: retry in %v, not later than the %v before", i, d, last)
		}
		last = res.RequeueAfter
	}
	if last != conflictRetryMax {
		t.Errorf("after 40 conflicts the retry is in %v, want %v", last, conflictRetryMax)
	}
	if res, n, _ := c.Retry(b, conflict); n != 1 || res.RequeueAfter != conflictRetry {
		t.Errorf("another workload's first conflict: %+v, %d in a row", res, n)
	}
	if _, _, ok := c.Retry(a, nil); ok {
		t.Error("a success was taken for a conflict")
	}
	if res, n, _ := c.Retry(a, conflict); n != 1 || res.RequeueAfter != conflictRetry {
		t.Errorf("a conflict after a success: %+v, %d in a row; want the count started over", res, n)
	}
}
