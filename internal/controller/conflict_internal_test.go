package controller

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestRetryConflict(t *testing.T) {
	deployments := schema.GroupResource{Group: "apps", Resource: "deployments"}
	conflict := apierrors.NewConflict(deployments, "web", errors.New("the object has been modified"))
	for _, tc := range []struct {
		name  string
		err   error
		retry bool
	}{
		{"no error", nil, false},
		{"conflict", conflict, true},
		{"wrapped conflict", fmt.Errorf("write Deployment/ns/web: %w", conflict), true},
		{"joined with another", errors.Join(errors.New("other"), conflict), true},
		{"not found", apierrors.NewNotFound(deployments, "web"), false},
		{"server error", apierrors.NewInternalError(errors.New("etcd")), false},
		{"plain error", errors.New("boom"), false},
	} {
		res, ok := retryConflict(tc.err)
		if ok != tc.retry || (ok && res.RequeueAfter != conflictRetry) || (!ok && !res.IsZero()) {
			t.Errorf("%s: retry %v, %+v; want retry %v", tc.name, ok, res, tc.retry)
		}
	}
}
