package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/approval"
	"github.com/reloader-operator/reloader/internal/explain"
	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/testutil/objects"
)

// Approve and notify with the built binary on a real control plane, --mode=approve: a Secret
// change to web is held (nothing rolls, explain and the gauge say what waits); a second change
// moves the digest, and `reloader approve --digest <the first>` is refused; `reloader approve`
// rolls web once, on the latest content, and the approval is spent. A Deployment whose own
// annotation says notify never rolls and gets one ReloadNotified Event per change.
func TestApproveAndNotifyModes(t *testing.T) {
	t.Parallel() // its own control plane and reloader
	bin := buildReloader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cluster, cl := startCluster(t, ctx, testenv.Options{Rollouts: true, Nodes: 1})
	const own, ns = "reloader-system", "careful"
	for _, n := range []string{own, ns} {
		testutil.Must(t, cluster.EnsureNamespace(ctx, cl, n))
	}
	out := outputLoggedOnFailure(t)
	_, addr := startReady(t, ctx, bin, cluster.Kubeconfig, own, "reloader | ", out, "--mode=approve")
	templates := watchTemplates(t, ctx, cluster.Config, ns)

	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}, StringData: map[string]string{"token": "A"}}
	web := objects.AutoDeployment(ns, "web", "unused")
	web.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}}}
	flags := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flags"}, Data: map[string]string{"FEATURE_X": "off"}}
	tells := objects.AutoDeployment(ns, "tells", "flags")
	tells.Annotations[approval.ModeAnnotation] = "notify"
	for _, o := range []client.Object{creds, web, flags, tells} {
		testutil.Must(t, cl.Create(ctx, o))
	}
	waitRecorded(t, ctx, cl, web)
	waitRecorded(t, ctx, cl, tells)
	const env = "STAKATER_CREDS_SECRET"
	cli := func(args ...string) (string, error) {
		args = append(args, "-n", ns, "--kubeconfig", cluster.Kubeconfig, "--reloader-namespace", own)
		b, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		return string(b), err
	}
	pending := func(not string) explain.Next {
		t.Helper()
		var n explain.Next
		testutil.Eventually(t, "explain: web waits for approval of a content other than "+not, func() error {
			o, err := cli("explain", "deployment/web", "-o", "json", "--mode=approve")
			if err != nil {
				return fmt.Errorf("%v: %s", err, o)
			}
			var w explain.Workload
			if err := json.Unmarshal([]byte(o), &w); err != nil {
				return err
			}
			if n = w.Next; n.Approval == "" || n.Approval == not {
				return fmt.Errorf("next %+v", n)
			}
			return nil
		})
		return n
	}
	writeToken := func(v string) {
		t.Helper()
		patch, _ := json.Marshal(map[string]any{"stringData": map[string]string{"token": v}})
		testutil.Must(t, cl.Patch(ctx, creds, client.RawPatch(types.MergePatchType, patch)))
	}

	writeToken("B")
	ev := waitForEvent(t, ctx, cl, ns, "web", "ApprovalPending")
	t.Logf("Event %s (%s): %s", ev.Reason, ev.Type, ev.Note)
	first := pending("")
	settled(t, "the held change", addr)
	if n := len(templates.values("web", env)); n != 0 {
		t.Fatalf("web rolled %d times while waiting for approval", n)
	}
	if g := gauge("http://"+addr+"/metrics", "reloader_reloads_pending_approval", ""); g != 1 {
		t.Errorf("reloader_reloads_pending_approval = %d while web waits, want 1", g)
	}
	// explain decides with the flags it is given, as for every flag: the install's --mode.
	explained, err := cli("explain", "deployment/web", "--mode=approve")
	t.Logf("reloader explain deployment/web --mode=approve:\n%s", explained)
	if err != nil || !strings.Contains(explained, "Next reconcile: held secret/creds until approved (approval of "+first.Approval+")") ||
		!strings.Contains(explained, "waiting for approval of "+first.Approval+" since ") {
		t.Errorf("explain does not show the pending approval of %s (%v)", first.Approval, err)
	}

	writeToken("C")
	second := pending(first.Approval)
	// reloader publishes the new digest on the workload, which approve reads (no hash key).
	testutil.Eventually(t, "the second digest published", testutil.Cond(func() (bool, error) {
		w := web.DeepCopy()
		err := cl.Get(ctx, client.ObjectKeyFromObject(web), w)
		return err == nil && w.Annotations[approval.PendingAnnotation] == second.Approval, err
	}))
	if o, err := cli("approve", "deployment/web", "--digest", first.Approval); err == nil || !strings.Contains(o, "changed since") {
		t.Errorf("approve --digest of the older content: %v: %s; want refused", err, o)
	}
	settled(t, "after the refused approval", addr)
	if n := len(templates.values("web", env)); n != 0 {
		t.Fatalf("web rolled %d times before any approval of its content", n)
	}

	approved, err := cli("approve", "deployment/web", "--digest", second.Approval)
	t.Logf("reloader approve deployment/web: %s", strings.TrimSpace(approved))
	testutil.Must(t, err)
	testutil.Eventually(t, "web rolled once", testutil.Cond(func() (bool, error) {
		return len(templates.values("web", env)) == 1, nil
	}))
	settled(t, "after the approved reload", addr)
	if n := len(templates.values("web", env)); n != 1 {
		t.Errorf("web rolled %d times after one approval, want 1", n)
	}
	testutil.Must(t, cl.Get(ctx, client.ObjectKeyFromObject(web), web))
	if v, ok := web.Annotations[approval.ApprovedAnnotation]; ok {
		t.Errorf("the approval %q was not spent by the reload", v)
	}
	if g := gauge("http://"+addr+"/metrics", "reloader_reloads_pending_approval", ""); g != 0 {
		t.Errorf("reloader_reloads_pending_approval = %d after the reload, want 0", g)
	}

	// Notify: two changes, two Events naming the key, no roll.
	for i, v := range []string{"on", "auto"} {
		patch, _ := json.Marshal(map[string]any{"data": map[string]string{"FEATURE_X": v}})
		testutil.Must(t, cl.Patch(ctx, flags, client.RawPatch(types.MergePatchType, patch)))
		testutil.Eventually(t, fmt.Sprintf("%d ReloadNotified", i+1), testutil.Cond(func() (bool, error) {
			return countEvents(t, ctx, cl, ns, "tells", "ReloadNotified") == i+1, nil
		}))
		settled(t, "after a notified change", addr)
	}
	ev = waitForEvent(t, ctx, cl, ns, "tells", "ReloadNotified")
	t.Logf("Event %s (%s): %s", ev.Reason, ev.Type, ev.Note)
	if !strings.Contains(ev.Note, "keys changed: FEATURE_X") {
		t.Errorf("ReloadNotified %q does not name the key FEATURE_X", ev.Note)
	}
	if n := countEvents(t, ctx, cl, ns, "tells", "ReloadNotified"); n != 2 {
		t.Errorf("%d ReloadNotified Events after two changes, want 2", n)
	}
	if n := len(templates.values("tells", "STAKATER_FLAGS_CONFIGMAP")); n != 0 {
		t.Errorf("tells rolled %d times in mode notify", n)
	}
	if g := gauge("http://"+addr+"/metrics", "reloader_reloads_notified_total", `kind="Deployment",namespace="careful"`); g != 2 {
		t.Errorf("reloader_reloads_notified_total = %d, want 2", g)
	}
}
