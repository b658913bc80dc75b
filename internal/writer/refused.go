package writer

import (
	"context"
	"fmt"
	"regexp"

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

// RBACRefusal names what reloader's RBAC refused in err: the verb and the resource, as
// "patch cronjobs.batch". ok is false for any other error, admission's 403s included.
func RBACRefusal(err error) (what string, ok bool) {
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

// Refused reports a write of obj, a kind, that reloader's RBAC does not allow (what, from
// RBACRefusal), and returns the error that ends the reconcile without a retry: retrying can't
// help until the RBAC changes, and the next change of a source, or a restart, tries again. A
// reload's failure is reported by the reconciler; a first record's (reloaded false) is
// reported here, as what was refused and what to grant.
func Refused(ctx context.Context, rep Reporter, kind string, obj client.Object, reloaded bool, what string, failed error) error {
	msg := fmt.Sprintf("reloader's RBAC does not allow %s; grant it for reloads of this %s (see the RBAC section of reloader's README)", what, kind)
	log.FromContext(ctx).Info("WARNING: write refused by RBAC; not retried until a source changes", "refused", what, "error", failed.Error())
	if !reloaded {
		rep.Event(obj, nil, true, report.ReasonReloadFail, "Record", termsafe.ClipNote("Recording the source hashes failed: "+msg))
	}
	return reconcile.TerminalError(fmt.Errorf("%s: %w", msg, failed))
}
