package writer

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestRBACRefusal: only the authorizer's 403 is an RBAC refusal; admission's 403s (quota,
// policies, webhooks) may pass on a retry and are not.
func TestRBACRefusal(t *testing.T) {
	cronjobs := schema.GroupResource{Group: "batch", Resource: "cronjobs"}
	for _, tt := range []struct {
		name string
		err  error
		want string
	}{
		{"RBAC, group", apierrors.NewForbidden(cronjobs, "nightly", errors.New(`User "upstream" cannot patch resource "cronjobs" in API group "batch" in the namespace "apps"`)), "patch cronjobs.batch"},
		{"RBAC, core", apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "", errors.New(`User "system:serviceaccount:r:r" cannot create resource "events" in API group "" in the namespace "apps"`)), "create events"},
		{"quota", apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "j", errors.New("exceeded quota: q, requested: count/jobs.batch=1, used: count/jobs.batch=1, limited: count/jobs.batch=1")), ""},
		{"admission policy", apierrors.NewForbidden(cronjobs, "nightly", errors.New(`ValidatingAdmissionPolicy 'deny' with binding 'deny' denied request: no`)), ""},
		{"not a 403", errors.New(`User "u" cannot patch resource "cronjobs"`), ""},
	} {
		got, ok := RBACRefusal(tt.err)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("%s: %q, %v; want %q", tt.name, got, ok, tt.want)
		}
	}
}
