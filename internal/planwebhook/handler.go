// Package planwebhook answers ConfigMap and Secret writes at admission with what they will
// roll: `reloader plan` for the object being written, as admission warnings ("this update will
// roll 37 workloads, 212 pods, in 1 namespace; paced over 14m0s"), and a refusal above the
// threshold a source carries in its MaxRollsLabel. It plans with explain.Planner, the
// controller's own decision code, and never blocks a write it can't plan.
//
// The handler is proven against a real API server (handler_test.go); serving it from the
// controller (a flag, its TLS from cert-manager or a self-managed certificate, the chart's
// ValidatingWebhookConfiguration with failurePolicy Ignore) is not wired yet.
package planwebhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/reloader-operator/reloader/internal/explain"
	"github.com/reloader-operator/reloader/internal/options"
)

// MaxRollsLabel on a ConfigMap or Secret is the most workloads one write of it may roll; a
// write that would roll more is refused. The live object's label counts (a write can't lift
// its own limit), else the written one's.
const MaxRollsLabel = "reloader.dev/max-rolls"

// Handler plans the ConfigMap or Secret of each admission request.
type Handler struct {
	// Config reaches the API server with read access to what a plan reads.
	Config *rest.Config
	// Conf is the controller's configuration: the plan decides as it does.
	Conf options.Config
	// KeyNamespace is where reloader's Secret hash key is.
	KeyNamespace string
}

// Handle implements admission.Handler.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	obj, err := decode(req.Kind.Kind, req.Object.Raw)
	if err != nil {
		return admission.Allowed("").WithWarnings("reloader: " + err.Error())
	}
	if obj.GetNamespace() == "" {
		obj.SetNamespace(req.Namespace)
	}
	p, err := explain.NewPlanner(ctx, h.Config, h.Conf, req.Namespace, h.KeyNamespace, []client.Object{obj})
	var plan *explain.Plan
	if err == nil {
		plan, err = p.Plan(ctx)
	}
	if err != nil {
		return admission.Allowed("").WithWarnings("reloader could not plan this change: " + err.Error())
	}
	if !plan.Rolls() {
		return admission.Allowed("")
	}
	s := plan.Summary
	msg := fmt.Sprintf("this %s will roll %s, %s, in %s", verb(req), plural(s.Workloads, "workload"),
		plural(int(s.Pods), "pod"), plural(s.Namespaces, "namespace"))
	if s.Last != nil && s.Last.After(plan.Now) {
		msg += "; paced over " + s.Last.Sub(plan.Now).Round(time.Second).String()
	}
	if limit, ok := maxRolls(req, obj); ok && s.Workloads > limit {
		return admission.Denied(fmt.Sprintf("%s, over the %d its %s label allows (`reloader plan` lists them)", msg, limit, MaxRollsLabel))
	}
	return admission.Allowed("").WithWarnings(msg)
}

func verb(req admission.Request) string {
	if req.OldObject.Raw == nil {
		return "creation"
	}
	return "update"
}

// maxRolls reads MaxRollsLabel from the live object, else the written one.
func maxRolls(req admission.Request, obj client.Object) (int, bool) {
	for _, labels := range []map[string]string{oldLabels(req), obj.GetLabels()} {
		if v, ok := labels[MaxRollsLabel]; ok {
			if n, err := strconv.Atoi(v); err == nil && n >= 0 {
				return n, true
			}
		}
	}
	return 0, false
}

func oldLabels(req admission.Request) map[string]string {
	if req.OldObject.Raw == nil {
		return nil
	}
	var old struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if json.Unmarshal(req.OldObject.Raw, &old) != nil {
		return nil
	}
	return old.Metadata.Labels
}

func decode(kind string, raw []byte) (client.Object, error) {
	var obj client.Object
	switch kind {
	case "ConfigMap":
		obj = &corev1.ConfigMap{}
	case "Secret":
		obj = &corev1.Secret{}
	default:
		return nil, fmt.Errorf("only ConfigMaps and Secrets are planned, not %s", kind)
	}
	if err := json.Unmarshal(raw, obj); err != nil {
		return nil, fmt.Errorf("decode the %s: %w", kind, err)
	}
	return obj, nil
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// NewHTTPHandler serves h as a validating webhook.
func NewHTTPHandler(h *Handler) http.Handler { return &admission.Webhook{Handler: h} }
