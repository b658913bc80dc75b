// Package planwebhook answers ConfigMap and Secret writes at admission with what they will
// roll: `reloader plan` for the object being written, as admission warnings ("this update will
// roll 37 workloads, 212 pods, in 1 namespace; paced over 14m0s"), and a refusal above the
// threshold a source carries in its MaxRollsLabel. It plans with explain's Planner over the
// controller's own cache and decision code, and never blocks a write it can't plan: that one
// is admitted, with a warning saying why.
//
// The controller serves it with --plan-webhook-addr (serve.go) to the API server alone
// (auth.go); the chart registers it with failurePolicy Ignore.
package planwebhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/reloader-operator/reloader/internal/explain"
	"github.com/reloader-operator/reloader/internal/options"
)

// MaxRollsLabel on a ConfigMap or Secret is the most workloads one write of it may roll; a
// write that would roll more is refused. The live object's label counts (a write can't lift
// its own limit), else the written one's.
const MaxRollsLabel = "reloader.dev/max-rolls"

// Path is where the webhook is served.
const Path = "/plan"

// DefaultTimeout bounds one plan, well under the webhook configuration's timeoutSeconds (5 in
// the chart): a plan not made by then is admitted with a warning.
const DefaultTimeout = 2 * time.Second

// maxInFlight bounds the plans made at once; a write past it is admitted unplanned.
const maxInFlight = 8

// Handler plans the ConfigMap or Secret of each admission request.
type Handler struct {
	// Controller lends the cache, source types, kinds and ReloaderConfigs the plan reads.
	Controller explain.Controller
	// Conf is the controller's configuration: the plan decides as it does.
	Conf options.Config
	// Ready reports whether the cache has synced; nil: always.
	Ready func() bool
	// Shard, with --shards, reports whether this replica holds a namespace; nil: all.
	Shard func(namespace string) (own, ready bool)
	// Timeout bounds one plan; 0 is DefaultTimeout.
	Timeout time.Duration
	// Log, at V(1) (--log-level=debug), says what each plan found: why a write is answered
	// with no warning. The zero Logger logs nothing.
	Log logr.Logger

	once     sync.Once
	inFlight chan struct{}
}

// Handle implements admission.Handler.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	ns := req.Namespace
	switch {
	case req.Operation != "CREATE" && req.Operation != "UPDATE":
		return admission.Allowed("")
	case ns == "":
		return notPlanned("the request names no namespace")
	case len(h.Conf.Namespaces) > 0 && !slices.Contains(h.Conf.Namespaces, ns),
		slices.Contains(h.Conf.NamespacesToIgnore, ns):
		return admission.Allowed("") // reloader rolls nothing there
	case h.Ready != nil && !h.Ready():
		return notPlanned("reloader is starting (its cache has not synced)")
	}
	if h.Shard != nil {
		if own, ready := h.Shard(ns); !own || !ready {
			return notPlanned("namespace " + ns + " is in a shard this replica does not hold (--shards)")
		}
	}
	obj, err := decode(req.Kind.Kind, req.Object.Raw)
	if err != nil {
		return notPlanned(err.Error())
	}
	var old client.Object
	if req.OldObject.Raw != nil {
		if old, err = decode(req.Kind.Kind, req.OldObject.Raw); err != nil {
			return notPlanned(err.Error())
		}
	}
	// The namespace is the one the API server admits the write in (the gate lets no one else
	// call): an object naming another is planned for none.
	for _, o := range []client.Object{obj, old} {
		if o == nil {
			continue
		}
		if o.GetNamespace() == "" {
			o.SetNamespace(ns)
		}
		if o.GetNamespace() != ns {
			return notPlanned("the object's namespace is not the request's")
		}
	}
	h.once.Do(func() { h.inFlight = make(chan struct{}, maxInFlight) })
	select {
	case h.inFlight <- struct{}{}:
	default:
		return notPlanned("too many writes planned at once")
	}
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan planned, 1)
	go func() {
		defer func() { <-h.inFlight }()
		// A panic here would end reloader, not only this answer.
		defer func() {
			if r := recover(); r != nil {
				done <- planned{err: fmt.Errorf("planning failed: %v", r)}
			}
		}()
		done <- h.plan(ctx, ns, obj, old)
	}()
	var res planned
	select {
	case res = <-done:
	case <-ctx.Done():
		// The plan reads only the cache: it ends soon, and holds its slot until then.
		return notPlanned("not planned within " + timeout.String())
	}
	if res.err != nil {
		return notPlanned(res.err.Error())
	}
	plan := res.plan
	h.logPlan(req, plan)
	if !plan.Rolls() {
		return admission.Allowed("")
	}
	s := plan.Summary
	msg := fmt.Sprintf("this %s will roll %s, %s, in %s", verb(req), plural(s.Workloads, "workload"),
		plural(int(s.Pods), "pod"), plural(s.Namespaces, "namespace"))
	if s.Last != nil && s.Last.After(plan.Now) {
		msg += "; paced over " + s.Last.Sub(plan.Now).Round(time.Second).String()
	}
	if limit, ok := maxRolls(old, obj); ok && s.Workloads > limit {
		return admission.Denied(fmt.Sprintf("%s, over the %d its %s label allows (`reloader plan` lists them)", msg, limit, MaxRollsLabel))
	}
	return admission.Allowed("").WithWarnings(msg)
}

// maxLogged bounds the workloads one plan's debug log names.
const maxLogged = 10

// logPlan logs, at V(1), the plan of a request: its summary, then each workload it lists
// (up to maxLogged) with its action and the reason.
func (h *Handler) logPlan(req admission.Request, plan *explain.Plan) {
	log := h.Log.V(1)
	if !log.Enabled() {
		return
	}
	log = log.WithValues("namespace", req.Namespace, "source", req.Kind.Kind+"/"+req.Name, "uid", req.UID)
	log.Info("planned", "workloads", plan.Summary.Workloads, "listed", len(plan.Workloads), "notes", plan.Notes)
	for i, w := range plan.Workloads {
		if i == maxLogged {
			log.Info("planned: more workloads not logged", "more", len(plan.Workloads)-maxLogged)
			break
		}
		log.Info("planned workload", "workload", w.Kind+"/"+w.Name, "action", w.Action, "rolls", w.Rolls, "reason", w.Reason, "next", w.Next.Action)
	}
}

type planned struct {
	plan *explain.Plan
	err  error
}

func (h *Handler) plan(ctx context.Context, ns string, obj, old client.Object) planned {
	p, err := explain.NewControllerPlanner(ctx, h.Controller, h.Conf, ns, obj, old)
	if err != nil {
		return planned{err: err}
	}
	plan, err := p.Plan(ctx)
	return planned{plan: plan, err: err}
}

// maxWhy bounds the reason a warning gives: an error may quote the object.
const maxWhy = 300

// notPlanned admits a write the webhook could not plan, saying why.
func notPlanned(why string) admission.Response {
	if len(why) > maxWhy {
		why = strings.ToValidUTF8(why[:maxWhy], "") + "..."
	}
	return admission.Allowed("").WithWarnings("reloader could not plan this change: " + why)
}

func verb(req admission.Request) string {
	if req.OldObject.Raw == nil {
		return "creation"
	}
	return "update"
}

// maxRolls reads MaxRollsLabel from the live object, else the written one.
func maxRolls(old, obj client.Object) (int, bool) {
	for _, o := range []client.Object{old, obj} {
		if o == nil {
			continue
		}
		if v, ok := o.GetLabels()[MaxRollsLabel]; ok {
			if n, err := strconv.Atoi(v); err == nil && n >= 0 {
				return n, true
			}
		}
	}
	return 0, false
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

// NewHTTPHandler serves h as a validating webhook. controller-runtime's admission.Webhook
// reads at most 7 MiB of a request (a ConfigMap and its old object are at most 1 MiB each).
func NewHTTPHandler(h *Handler) http.Handler { return &admission.Webhook{Handler: h} }
