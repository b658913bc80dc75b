package app

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/flap"
	"github.com/reloader-operator/reloader/internal/gate"
	"github.com/reloader-operator/reloader/internal/gate/mode"
	"github.com/reloader-operator/reloader/internal/gate/quarantine"
	"github.com/reloader-operator/reloader/internal/gate/wave"
	"github.com/reloader-operator/reloader/internal/gate/window"
	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
)

// Guardrails are the gates every kind's reconciler shares: a source flaps, and a source's
// waves span, whatever kinds use it.
type Guardrails struct {
	Quarantine *quarantine.Gate
	Mode       *mode.Mode
	Wave       *wave.Gate
	Window     window.Gate
}

// GuardrailsFrom are what the guardrails are built from, beside the flags.
type GuardrailsFrom struct {
	// Flaps is the flap breaker's table; nil: the breaker is off (a dry run still reads the
	// quarantines recorded on targets).
	Flaps *flap.Table
	// Key is the install key that seals the quarantine records; nil: none.
	Key func(context.Context) (hash.Key, error)
	// Cluster is what the wave gate reads of the workloads; Cache and Live read them (Live:
	// whole, when the cache dropped their status; nil: what Cache reads is whole).
	Cluster     wave.Cluster
	Cache, Live client.Reader
	// Metrics, nil for explain: nothing counted.
	Metrics *metrics.Metrics
	// Caches keep the time zones of reload windows loaded; nil: none.
	Caches *reload.Caches
}

// NewGuardrails builds the guardrails as conf sets them (--mode, --waves-min-workloads,
// --min-reload-interval).
func NewGuardrails(conf options.Config, from GuardrailsFrom) Guardrails {
	q := quarantine.Config{Table: from.Flaps, Key: from.Key}
	m := mode.Config{Default: conf.Mode}
	w := wave.Config{MinWorkloads: conf.WavesMinWorkloads, Cluster: from.Cluster, Cache: from.Cache, Live: from.Live}
	if met := from.Metrics; met != nil {
		q.Held = met.Held
		m.Held, m.Notified, m.Pending = met.Held, met.ReloadsNotified, met.PendingApproval
		w.Held, w.Halted = met.Held, met.WavesHalted
	}
	return Guardrails{Quarantine: quarantine.New(q), Mode: mode.New(m), Wave: wave.New(w),
		Window: window.Gate{MinInterval: conf.MinReloadInterval, Caches: from.Caches}}
}

// Gates are the guardrails of the reload pipeline, in their order of precedence, written here
// only: the flap breaker's quarantine, mode notify, the health-gated waves, mode approve, then
// the target's own interval and window. The rate limiter is the step after them (gate/rate).
// The first hold in this order wins; a notice counts when no gate before it holds. One chain
// serves every target kind: the workload reconcilers and the generic targets' reconciler.
func Gates(g Guardrails) gate.Chain {
	return gate.Chain{
		g.Quarantine,
		g.Mode.Notify(),
		g.Wave,
		g.Mode.Approve(),
		g.Window,
	}
}
