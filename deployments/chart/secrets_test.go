package chart_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/reloader-operator/reloader/deployments/render"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// Webhook and alert URLs hold tokens in their paths. Anyone with `view` reads a Deployment
// (args, env values), not Secrets: the URLs must reach the container through secretKeyRef
// only, whichever of upstream's keys gives them.
func TestURLsStayInSecrets(t *testing.T) {
	const hook, alert, proxy = "https://hooks.example.com/T0/s3cr3t-hook", "https://chat.example.com/s3cr3t-alert", "http://u:s3cr3t-proxy@proxy:3128"
	for _, doc := range []string{
		`reloader: {webhookUrl: "` + hook + `", deployment: {env: {secret: {ALERT_ON_RELOAD: "true", ALERT_WEBHOOK_URL: "` + alert + `"}}}}`,
		// Upstream's values also allow the alert URL under open: it still goes to the Secret.
		`reloader: {webhookUrl: "` + hook + `", deployment: {env: {open: {ALERT_ON_RELOAD: "true", ALERT_SINK: slack,
			ALERT_WEBHOOK_URL: "` + alert + `", ALERT_WEBHOOK_PROXY: "` + proxy + `"}}}}`,
	} {
		objs := renderChart(t, doc)
		for _, o := range objs {
			if o.GetKind() == "Secret" {
				continue
			}
			b, err := json.Marshal(o.Object)
			testutil.Must(t, err)
			if strings.Contains(string(b), "s3cr3t") {
				t.Errorf("%s: %s %s holds a URL: %s", doc, o.GetKind(), o.GetName(), b)
			}
		}
		_, c := container(t, objs)
		for _, name := range []string{"WEBHOOK_URL", "ALERT_WEBHOOK_URL"} {
			if ref := secretRef(c, name); ref == nil || ref.Name != fullname || ref.Key != name {
				t.Errorf("%s: env %s is not read from Secret %s key %s: %+v", doc, name, fullname, name, ref)
			}
		}
		conf := parseOptions(t, objs)
		if conf.WebhookURL != hook || conf.Alert.WebhookURL != alert || !conf.Alert.Enabled {
			t.Errorf("%s: the binary reads webhook %q, alert %q (on: %v)", doc, conf.WebhookURL, conf.Alert.WebhookURL, conf.Alert.Enabled)
		}
		if d, _ := container(t, objs); d.Spec.Template.Annotations["checksum/secret"] == "" {
			t.Errorf("%s: the pods do not roll when the Secret changes", doc)
		}
	}
}

// webhookUrlSecret names an existing Secret: the chart reads it and creates none.
func TestWebhookURLFromExistingSecret(t *testing.T) {
	objs := renderChart(t, `reloader: {webhookUrlSecret: {name: hooks, key: slack}}`)
	_, c := container(t, objs)
	if ref := secretRef(c, "WEBHOOK_URL"); ref == nil || ref.Name != "hooks" || ref.Key != "slack" {
		t.Errorf("WEBHOOK_URL from %+v, want Secret hooks key slack", ref)
	}
	if n := len(render.OfKind(objs, "Secret")); n != 0 {
		t.Errorf("%d Secrets rendered, want none", n)
	}
	// Notifying only, as with webhookUrl: the same read-only grants.
	byURL := renderChart(t, `reloader: {webhookUrl: "https://h.example/x"}`)
	got, want := render.Find(objs, "ClusterRole", fullname+"-role"), render.Find(byURL, "ClusterRole", fullname+"-role")
	if got == nil || want == nil || !reflect.DeepEqual(got.Object["rules"], want.Object["rules"]) {
		t.Errorf("ClusterRole with webhookUrlSecret %v, want as with webhookUrl %v", got, want)
	}
	if _, err := renderValues(values(t, `reloader: {webhookUrl: "https://h.example/x", webhookUrlSecret: {name: hooks}}`)); err == nil {
		t.Error("webhookUrl and webhookUrlSecret both accepted")
	}
}

func secretRef(c corev1.Container, name string) *corev1.SecretKeySelector {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil {
			return e.ValueFrom.SecretKeyRef
		}
	}
	return nil
}

// The admission policy is off by default, and binds the ServiceAccount reloader runs as.
func TestAdmissionPolicyNamesReloadersServiceAccount(t *testing.T) {
	if n := len(render.OfKind(renderChart(t, ``), "ValidatingAdmissionPolicy")); n != 0 {
		t.Errorf("%d policies rendered by default", n)
	}
	objs := renderChart(t, `reloader: {admissionPolicy: {enabled: true}, serviceAccount: {name: custom}}`)
	p := render.Find(objs, "ValidatingAdmissionPolicy", fullname+"-workload-writes")
	b := render.Find(objs, "ValidatingAdmissionPolicyBinding", fullname+"-workload-writes")
	if p == nil || b == nil {
		t.Fatal("policy or binding not rendered")
	}
	conds, _, _ := unstructured.NestedSlice(p.Object, "spec", "matchConditions")
	want := `request.userInfo.username == "system:serviceaccount:` + namespace + `:custom"`
	if len(conds) != 1 || conds[0].(map[string]any)["expression"] != want {
		t.Errorf("matchConditions %v, want %s", conds, want)
	}
	if actions, _, _ := unstructured.NestedStringSlice(b.Object, "spec", "validationActions"); !reflect.DeepEqual(actions, []string{"Deny"}) {
		t.Errorf("binding actions %v, want [Deny]", actions)
	}
}
