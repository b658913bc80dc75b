package installtest

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/reloader-operator/reloader/internal/testenv/audit"
)

// auditPolicy records every request of a ServiceAccount, once, when its response is sent;
// reloader runs as one, the test itself as a client-certificate admin that is left out.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts"]
- level: None
`

// settleAuditLog waits until the log has stopped growing for a moment: the API server logs
// a watch when it notices that its client has gone, shortly after the process exited.
func settleAuditLog() {
	var last int64 = -1
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		fi, err := os.Stat(auditLog)
		if err != nil || fi.Size() == last {
			return
		}
		last = fi.Size()
	}
}

// requestsOf returns the audited requests of user.
func requestsOf(user string) ([]audit.Event, error) { return audit.Read(auditLog, user) }

// forbidden lists the distinct requests answered 403, with how often each was.
func forbidden(events []audit.Event) []string {
	counts := map[string]int{}
	for _, e := range events {
		if e.ResponseStatus.Code == 403 {
			counts[e.Request()]++
		}
	}
	var out []string
	for what, n := range counts {
		out = append(out, fmt.Sprintf("%s ×%d", what, n))
	}
	sort.Strings(out)
	return out
}

// refusals is an error naming the requests of user refused so far, if any.
func refusals(user string) error {
	events, err := requestsOf(user)
	if err != nil {
		return err
	}
	if denied := forbidden(events); len(denied) > 0 {
		return fmt.Errorf("%s was refused (403): %s", user, strings.Join(denied, "; "))
	}
	return nil
}

// summary counts requests by verb, resource and code, for the log of a passing run: what
// the install's RBAC is used for.
func summary(events []audit.Event) string {
	counts := map[string]int{}
	for _, e := range events {
		r := e.ObjectRef.Resource
		if e.ObjectRef.APIGroup != "" {
			r = e.ObjectRef.APIGroup + "/" + r
		}
		if r == "" {
			r = e.RequestURI // discovery
		}
		counts[fmt.Sprintf("%s %s %d", e.Verb, r, e.ResponseStatus.Code)]++
	}
	var parts []string
	for k, n := range counts {
		parts = append(parts, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// checkAudit fails the test for every request of user the API server refused with 403,
// naming it so that the missing RBAC rule is evident.
func checkAudit(t *testing.T, user string) {
	settleAuditLog()
	events, err := requestsOf(user)
	if err != nil {
		t.Errorf("read audit log: %v", err)
		return
	}
	if len(events) == 0 {
		t.Errorf("no request of %s in the audit log: reloader did not run as the chart's ServiceAccount", user)
		return
	}
	if denied := forbidden(events); len(denied) > 0 {
		t.Errorf("%s was refused (403) %d kinds of request; the chart's RBAC misses:\n  %s", user, len(denied), strings.Join(denied, "\n  "))
		return
	}
	t.Logf("audit: %d requests of %s, none refused (%s)", len(events), user, summary(events))
}
