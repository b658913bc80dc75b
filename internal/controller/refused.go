package controller

import (
	"context"
	"fmt"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reloader-operator/reloader/internal/report"
	"github.com/reloader-operator/reloader/internal/termsafe"
)

// rbacDenied matches the API server's authorizer refusal (k8s.io/apiserver's forbidden
// message). Admission also answers 403 (webhooks, policies, quota), and those may pass on a
// retry; an RBAC refusal does not until someone changes the RBAC.
var rbacDenied = regexp.MustCompile(`User "[^"]*" cannot (\S+) resource "([^"]+)"(?: in API group "([^"]*)")?`)

// rbacRefusal names what reloader's RBAC refused in err: the verb and the resource, as
// "patch cronjobs.batch". ok is false for any other error, admission's 403s included.
func rbacRefusal(err error) (what string, ok bool) {
	if !apierrors.IsForbidden(err) {
		return "", false
	}
	m := rbacDenied.FindStringSubmatch(err.Error())
	if m == nil {
		return "", false
	}
	resource := m[2]
	if m[3] != "" {
		resource += "." + m[3]
	}
	return m[1] + " " + resource, true
}

// refused reports a write that reloader's RBAC does not allow, and ends the reconcile without
// a retry: retrying can't help until the RBAC changes, and the next change of a source, or a
// restart, tries again. A reload's failure is already reported (report); a first record's is
// reported here, as what was refused and what to grant.
func (r *WorkloadReconciler) refused(ctx context.Context, obj client.Object, d report.Outcome, what string) error {
	msg := fmt.Sprintf("reloader's RBAC does not allow %s; grant it for reloads of this %s (see the RBAC section of reloader's README)", what, r.Kind.Name())
	log.FromContext(ctx).Info("WARNING: write refused by RBAC; not retried until a source changes", "refused", what, "error", d.Failed.Error())
	if len(d.Reloaded) == 0 {
		r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonReloadFail, "Record",
			"%s", termsafe.ClipNote("Recording the source hashes failed: "+msg))
	}
	return reconcile.TerminalError(fmt.Errorf("%s: %w", msg, d.Failed))
}
