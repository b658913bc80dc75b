package loadtest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/ptr"

	"github.com/reloader-operator/reloader/tools/internal/loadtest/faults"
)

// Spec is the state a scenario starts from.
type Spec struct {
	Namespaces []string
	Sources    []Source
	Workloads  []Workload
	// Configs are ReloaderConfigs, created before the workloads; they need the CRD.
	Configs []RuleConfig
	// Args are reloader flags the scenario needs, given to both sides.
	Args []string
	// OwnArgs are flags of this project's build the scenario needs: given, after the side's
	// own, to a side whose --help lists them, left out for one that does not (OwnArgs).
	OwnArgs []string
	// Holds, when set, says why a build may hold this scenario's reloads on purpose (a
	// guardrail): its latency rows are shown, not gated.
	Holds string
	// Faults, when set, puts the fault proxy between the controller and the API server; the
	// scenario turns the faults on and off through the Driver.
	Faults *faults.Config
	// Checks are read from the cluster after the load: see checks.go.
	Checks []string
}

// Params size a run.
type Params struct {
	// Scale multiplies the design's object counts (and, without Duration, its durations):
	// 1 is the design's size, 0.1 a tenth of it (at least one of each thing; durations at
	// least 5 s).
	Scale float64
	// Duration, when set, is how long every timed scenario drives load, instead of its
	// design duration times Scale.
	Duration time.Duration
}

// N is a design count at this scale, at least 1.
func (p Params) N(design int) int {
	return max(1, int(math.Round(float64(design)*p.scale())))
}

// D is how long a timed scenario of the given design duration drives load.
func (p Params) D(design time.Duration) time.Duration {
	if p.Duration > 0 {
		return p.Duration
	}
	return max(5*time.Second, time.Duration(float64(design)*min(p.scale(), 1)))
}

func (p Params) scale() float64 {
	if p.Scale <= 0 {
		return 1
	}
	return p.Scale
}

// Scenario is one load-test case.
type Scenario struct {
	ID    string
	Title string
	Build func(p Params) Spec
	Drive func(ctx context.Context, d *Driver, s Spec, p Params) error
}

// builder assembles specs.
type builder struct{ Spec }

func (b *builder) ns(name string) string {
	b.Namespaces = append(b.Namespaces, name)
	return name
}

func (b *builder) source(kind, ns, name string, size int) Source {
	s := Source{Kind: kind, Namespace: ns, Name: name, Size: size}
	b.Sources = append(b.Sources, s)
	return s
}

func (b *builder) workload(kind, ns, name string, refs ...Ref) Workload {
	w := Workload{Kind: kind, Namespace: ns, Name: name, Refs: refs}
	b.Workloads = append(b.Workloads, w)
	return w
}

func uses(s Source) Ref { return Ref{Source: s, How: EnvFrom} }

// pairs builds n ConfigMaps in ns, each used by perSource Deployments.
func (b *builder) pairs(ns, prefix string, n, perSource, size int) {
	for i := range n {
		s := b.source(ConfigMap, ns, fmt.Sprintf("%s-%d", prefix, i), size)
		for j := range perSource {
			b.workload(Deployment, ns, fmt.Sprintf("%s-%d-%d", prefix, i, j), uses(s))
		}
	}
}

func updateAll(ctx context.Context, d *Driver, sources []Source) error {
	for _, s := range sources {
		if err := d.Update(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

func sleep(ctx context.Context, dur time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(dur):
		return nil
	}
}

// periodic updates every source of the scenario each interval, for the design duration.
func periodic(design, interval time.Duration) func(context.Context, *Driver, Spec, Params) error {
	return func(ctx context.Context, d *Driver, s Spec, p Params) error {
		return every(ctx, p.D(design), interval, func(int) error { return updateAll(ctx, d, s.Sources) })
	}
}

// steady updates sources at perSecond writes a second for the design duration, the source
// of each write chosen by pick (from a seeded generator: both sides write the same sequence).
func steady(design time.Duration, perSecond float64, sources func(Spec) []Source) func(context.Context, *Driver, Spec, Params) error {
	return func(ctx context.Context, d *Driver, s Spec, p Params) error {
		src := sources(s)
		rng := rand.New(rand.NewPCG(uint64(len(src)), 11))
		return every(ctx, p.D(design), time.Duration(float64(time.Second)/perSecond), func(int) error {
			return d.Update(ctx, src[rng.IntN(len(src))])
		})
	}
}

func all(s Spec) []Source { return s.Sources }

// zero sets the replicas of the workloads built so far to 0: fan-outs of thousands roll their
// templates (and ReplicaSets) without starting thousands of pods on the fake nodes.
func (b *builder) zero() {
	for i := range b.Workloads {
		b.Workloads[i].Replicas = ptr.To[int32](0)
	}
}

// burst updates every source n times, gap apart.
func burst(ctx context.Context, d *Driver, sources []Source, n int, gap time.Duration) error {
	for range n {
		if err := updateAll(ctx, d, sources); err != nil {
			return err
		}
		if err := sleep(ctx, gap); err != nil {
			return err
		}
	}
	return nil
}

func changed(prefix string) func(s Spec) []Source {
	return func(s Spec) []Source {
		var out []Source
		for _, src := range s.Sources {
			if strings.HasPrefix(src.Name, prefix) {
				out = append(out, src)
			}
		}
		return out
	}
}

// loadFor is how long a scenario whose duration the design leaves open drives load at scale 1:
// long enough for a steady state, short enough for the full set to take about an hour on two
// cores.
const loadFor = 30 * time.Second

// Scenarios are every scenario, by ID. S1-S13 follow the load-test design of the
// controller-runtime rewrite, at its sizes when Params.Scale is 1; S14-S19 are this project's,
// S18 and S19 the guardrails' (guard.go).
var Scenarios = map[string]Scenario{
	"S1": {ID: "S1", Title: "burst: 50 writes in 10 s to one ConfigMap used by 500 Deployments, and 10 to a Secret they also use",
		Build: func(p Params) Spec {
			var b builder
			ns := b.ns("s1")
			cm := b.source(ConfigMap, ns, "burst-config", 256)
			sec := b.source(Secret, ns, "burst-secret", 128)
			for i := range p.N(500) {
				b.workload(Deployment, ns, fmt.Sprintf("burst-%d", i), uses(cm), uses(sec))
			}
			b.zero()
			return b.Spec
		},
		Drive: func(ctx context.Context, d *Driver, s Spec, p Params) error {
			writes := max(10, p.N(50))
			gap := p.D(10*time.Second) / time.Duration(writes)
			cm, sec := s.Sources[0], s.Sources[1]
			return every(ctx, p.D(10*time.Second), gap, func(i int) error {
				if err := d.Update(ctx, cm); err != nil || i%5 != 4 {
					return err
				}
				return d.Update(ctx, sec)
			})
		}},
	"S2": {ID: "S2", Title: "fan-out at rate: 200 ConfigMaps and 200 Secrets, 5-20 Deployments each, 5 writes/s for 5 min",
		Build: func(p Params) Spec {
			var b builder
			ns := b.ns("s2")
			for i := range p.N(200) {
				cm := b.source(ConfigMap, ns, fmt.Sprintf("fan-cm-%d", i), 512)
				sec := b.source(Secret, ns, fmt.Sprintf("fan-secret-%d", i), 256)
				for j := range 5 + (i*7)%16 { // 5 to 20 users per source
					b.workload(Deployment, ns, fmt.Sprintf("fan-%d-%d", i, j), uses(cm), uses(sec))
				}
			}
			b.zero()
			return b.Spec
		},
		Drive: steady(5*time.Minute, 5, all)},
	"S3": {ID: "S3", Title: "many namespaces: 200 namespaces × 20 Deployments (4,000), a ConfigMap and a Secret each",
		Build: func(p Params) Spec {
			var b builder
			for i := range p.N(200) {
				ns := b.ns(fmt.Sprintf("s3-%d", i))
				cm := b.source(ConfigMap, ns, "config", 256)
				sec := b.source(Secret, ns, "credentials", 128)
				for j := range 20 {
					refs := []Ref{uses(cm)}
					if j%2 == 0 {
						refs = append(refs, uses(sec))
					}
					b.workload(Deployment, ns, fmt.Sprintf("app-%d", j), refs...)
				}
			}
			b.zero()
			return b.Spec
		},
		Drive: steady(time.Minute, 5, all)},
	"S4": {ID: "S4", Title: "no-op updates: labels, annotations and identical data only; nothing may reload",
		Build: func(p Params) Spec {
			var b builder
			b.pairs(b.ns("s4"), "noop", p.N(50), 2, 256)
			return b.Spec
		},
		Drive: func(ctx context.Context, d *Driver, s Spec, p Params) error {
			return every(ctx, p.D(loadFor), 100*time.Millisecond, func(i int) error { return d.Touch(ctx, s.Sources[i%len(s.Sources)], i) })
		}},
	"S5": {ID: "S5", Title: "churn: Deployments created and deleted, sources deleted and re-created, while sources change",
		Build: func(p Params) Spec {
			var b builder
			b.pairs(b.ns("s5"), "churn", p.N(30), 2, 256)
			b.Args = []string{"--reload-on-create=true", "--reload-on-delete=true"}
			return b.Spec
		},
		Drive: func(ctx context.Context, d *Driver, s Spec, p Params) error {
			var live []Workload
			return every(ctx, p.D(loadFor), 250*time.Millisecond, func(i int) error {
				src := s.Sources[i%len(s.Sources)]
				w := Workload{Kind: Deployment, Namespace: src.Namespace, Name: fmt.Sprintf("churn-new-%d", i), Refs: []Ref{uses(src)}}
				if err := d.AddWorkload(ctx, w); err != nil {
					return err
				}
				live = append(live, w)
				if len(live) > 20 {
					if err := d.DeleteWorkload(ctx, live[0]); err != nil {
						return err
					}
					live = live[1:]
				}
				if i%5 == 4 {
					// The source goes away and comes back with new content.
					return d.Recreate(ctx, src)
				}
				return d.Update(ctx, src)
			})
		}},
	"S6": {ID: "S6", Title: "controller restart (SIGTERM) mid-load; untouched workloads must not restart",
		Build: func(p Params) Spec {
			var b builder
			ns := b.ns("s6")
			b.pairs(ns, "busy", p.N(100), 1, 256)
			b.pairs(ns, "quiet", p.N(100), 1, 256)
			return b.Spec
		},
		Drive: func(ctx context.Context, d *Driver, s Spec, p Params) error {
			busy := changed("busy")(s)
			half := p.D(loadFor) / 2
			tick := max(time.Second, time.Duration(len(busy))*20*time.Millisecond) // about 50 writes a second
			if err := every(ctx, half, tick, func(int) error { return updateAll(ctx, d, busy) }); err != nil {
				return err
			}
			if err := d.Restart(ctx); err != nil {
				return err
			}
			return every(ctx, half, tick, func(int) error { return updateAll(ctx, d, busy) })
		}},
	"S7": {ID: "S7", Title: "API faults: 429 with Retry-After, 500/503, added latency, a QPS limit and cut watch streams, under 10 writers",
		Build: func(p Params) Spec {
			var b builder
			b.pairs(b.ns("s7"), "faulty", p.N(50), 2, 256)
			b.Faults = &faults.Config{TooManyRequests: 0.05, RetryAfterSeconds: 1, ServerErrors: 0.05, Latency: 100 * time.Millisecond,
				LatencyShare: 0.2, QPS: 20, Burst: 40, DropWatchAfter: 20 * time.Second, Seed: 7}
			return b.Spec
		},
		Drive: func(ctx context.Context, d *Driver, s Spec, p Params) error {
			d.SetFaults(*s.Faults)
			defer d.ClearFaults()
			var wg sync.WaitGroup
			errs := make(chan error, 10)
			for w := range 10 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(w), 7))
					errs <- every(ctx, p.D(loadFor), time.Second, func(int) error {
						return d.Update(ctx, s.Sources[rng.IntN(len(s.Sources))])
					})
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					return err
				}
			}
			return nil
		}},
	"S8": {ID: "S8", Title: "large objects: ConfigMaps and Secrets of 960 KiB, near the 1 MiB limit",
		Build: func(p Params) Spec {
			var b builder
			ns := b.ns("s8")
			for i := range p.N(10) {
				cm := b.source(ConfigMap, ns, fmt.Sprintf("big-cm-%d", i), 960<<10)
				sec := b.source(Secret, ns, fmt.Sprintf("big-secret-%d", i), 960<<10)
				for j := range 5 {
					b.workload(Deployment, ns, fmt.Sprintf("big-%d-%d", i, j), uses(cm), uses(sec))
				}
			}
			return b.Spec
		},
		Drive: steady(loadFor, 2, all)},
	"S9": {ID: "S9", Title: "every workload kind: Deployment, StatefulSet, DaemonSet, CronJob, Job",
		Build: func(p Params) Spec {
			var b builder
			ns := b.ns("s9")
			for i := range p.N(10) {
				cm := b.source(ConfigMap, ns, fmt.Sprintf("kinds-%d", i), 256)
				for _, kind := range []string{Deployment, StatefulSet, DaemonSet, CronJob, Job} {
					b.workload(kind, ns, fmt.Sprintf("%s-%d", strings.ToLower(kind), i), uses(cm))
					if kind == Job {
						// kwok completes Job pods at once; ask for finished Jobs to be replaced too.
						b.Workloads[len(b.Workloads)-1].Annotations = map[string]string{"reloader.dev/recreate-finished": "true"}
					}
				}
			}
			return b.Spec
		},
		Drive: periodic(loadFor, 10*time.Second)},
	"S10": {ID: "S10", Title: "Secrets and mixed: a ConfigMap and a Secret changed together, then the Secret alone",
		Build: func(p Params) Spec {
			var b builder
			ns := b.ns("s10")
			for i := range p.N(50) {
				cm := b.source(ConfigMap, ns, fmt.Sprintf("mixed-cm-%d", i), 256)
				sec := b.source(Secret, ns, fmt.Sprintf("mixed-secret-%d", i), 128)
				b.workload(Deployment, ns, fmt.Sprintf("mixed-%d", i), uses(cm), Ref{Source: sec, How: Volume})
			}
			return b.Spec
		},
		Drive: func(ctx context.Context, d *Driver, s Spec, p Params) error {
			return every(ctx, p.D(loadFor), 5*time.Second, func(i int) error {
				if i%2 == 0 {
					return updateAll(ctx, d, s.Sources)
				}
				return updateAll(ctx, d, changed("mixed-secret")(s))
			})
		}},
	"S11": {ID: "S11", Title: "annotations reload strategy: every reloaded template carries last-reloaded-from",
		Build: func(p Params) Spec {
			var b builder
			b.pairs(b.ns("s11"), "annotated", p.N(50), 2, 256)
			b.Args = []string{"--reload-strategy=annotations"}
			b.Checks = []string{CheckLastReloadedFrom}
			return b.Spec
		},
		Drive: steady(loadFor, 5, all)},
	"S12": {ID: "S12", Title: "pause-period: Deployments paused 5 s from each reload; pausing must cut the rollouts",
		Build: func(p Params) Spec {
			var b builder
			b.pairs(b.ns("s12"), "paused", p.N(20), 1, 256)
			for i := range b.Workloads {
				b.Workloads[i].Annotations = map[string]string{"deployment.reloader.stakater.com/pause-period": "5s"}
			}
			b.Checks = []string{CheckPauseCut}
			return b.Spec
		},
		Drive: periodic(loadFor, 2*time.Second)},
	"S13": {ID: "S13", Title: "complex references: init containers, valueFrom, volumes, projected volumes",
		Build: func(p Params) Spec {
			var b builder
			ns := b.ns("s13")
			for i := range p.N(25) {
				var refs []Ref
				for _, how := range []string{Init, EnvValue, Volume, Projected} {
					kind := ConfigMap
					if how == Projected || how == EnvValue && i%2 == 1 {
						kind = Secret
					}
					refs = append(refs, Ref{Source: b.source(kind, ns, fmt.Sprintf("%s-%s-%d", strings.ToLower(kind), strings.ToLower(how), i), 256), How: how})
				}
				b.workload(Deployment, ns, fmt.Sprintf("complex-%d", i), refs...)
			}
			return b.Spec
		},
		Drive: steady(loadFor, 2, all)},
	"S14": {ID: "S14", Title: "change while down: sources changed while the controller is stopped",
		Build: func(p Params) Spec {
			var b builder
			ns := b.ns("s14")
			b.pairs(ns, "changed", p.N(50), 1, 256)
			b.pairs(ns, "unchanged", p.N(50), 1, 256)
			return b.Spec
		},
		Drive: func(ctx context.Context, d *Driver, s Spec, p Params) error {
			d.StopController()
			if err := updateAll(ctx, d, changed("changed")(s)); err != nil {
				return err
			}
			if err := d.StartController(ctx); err != nil {
				return err
			}
			return sleep(ctx, p.D(20*time.Second))
		}},
	"S15": {ID: "S15", Title: "memory at scale: 500 10 KiB ConfigMaps and 500 Secrets, 100 Deployments",
		Build: func(p Params) Spec {
			var b builder
			ns := b.ns("s15")
			for i := range p.N(500) {
				b.source(ConfigMap, ns, fmt.Sprintf("bulk-cm-%d", i), 10<<10)
				b.source(Secret, ns, fmt.Sprintf("bulk-secret-%d", i), 10<<10)
			}
			for i := range min(p.N(100), p.N(500)) {
				b.workload(Deployment, ns, fmt.Sprintf("bulk-%d", i), uses(b.Sources[2*i]), uses(b.Sources[2*i+1]))
			}
			b.zero()
			return b.Spec
		},
		Drive: func(ctx context.Context, d *Driver, s Spec, p Params) error {
			used := 2 * len(s.Workloads)
			return every(ctx, p.D(loadFor), time.Second, func(i int) error { return d.Update(ctx, s.Sources[(i*2)%used]) })
		}},
	"S16": {ID: "S16", Title: "ReloaderConfigs: 10 configs, each selecting 10 unannotated Deployments by label",
		Build: func(p Params) Spec { return grouped("s16", p.N(10), true) },
		Drive: configGroups},
	"S17": {ID: "S17", Title: "S16's shape with the auto annotation instead of ReloaderConfigs, to compare",
		Build: func(p Params) Spec { return grouped("s17", p.N(10), false) },
		Drive: configGroups},
	"S18": {ID: "S18", Title: "flapping Secret: two writers (field managers) alternate its content every 6 s for 3 min; its 5 Deployments, quiet, one more change",
		Build: flapping, Drive: flap},
	"S19": {ID: "S19", Title: "failing shared config: a ConfigMap used by 40 Deployments gets a content their pods can't run on (nodes cordoned), then the fix",
		Build: failingShared, Drive: spread},
}

// grouped builds n ConfigMaps, each used by 10 Deployments labelled with its group; with
// configs the Deployments carry no annotation and one ReloaderConfig per group chooses them.
func grouped(ns string, n int, configs bool) Spec {
	var b builder
	b.ns(ns)
	for i := range n {
		group := fmt.Sprintf("group-%d", i)
		s := b.source(ConfigMap, ns, group, 256)
		for j := range 10 {
			w := b.workload(Deployment, ns, fmt.Sprintf("%s-%d", group, j), uses(s))
			w.Plain, w.Labels, w.Replicas = configs, map[string]string{"group": group}, ptr.To[int32](0)
			b.Workloads[len(b.Workloads)-1] = w
		}
		if configs {
			b.Configs = append(b.Configs, RuleConfig{Namespace: ns, Name: group, Group: group, Source: s})
		}
	}
	return b.Spec
}

// configGroups changes a tenth of the groups' ConfigMaps each second, in turn.
func configGroups(ctx context.Context, d *Driver, s Spec, p Params) error {
	return every(ctx, p.D(loadFor), time.Second, func(i int) error {
		for j := range max(len(s.Sources)/10, 1) {
			if err := d.Update(ctx, s.Sources[(i*max(len(s.Sources)/10, 1)+j)%len(s.Sources)]); err != nil {
				return err
			}
		}
		return nil
	})
}

// ScenarioIDs lists the scenarios in order.
func ScenarioIDs() []string {
	ids := make([]string, 0, len(Scenarios))
	for id := range Scenarios {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return len(ids[i]) < len(ids[j]) || len(ids[i]) == len(ids[j]) && ids[i] < ids[j] })
	return ids
}

// Select parses --scenario: "all", or comma-separated IDs.
func Select(spec string) ([]Scenario, error) {
	switch strings.ToLower(spec) {
	case "", "all":
		var design []string
		for _, id := range ScenarioIDs() {
			if !isPreset(id) {
				design = append(design, id)
			}
		}
		spec = strings.Join(design, ",")
	case "vs-upstream":
		spec = VsUpstreamSet
	}
	var out []Scenario
	for _, id := range strings.Split(spec, ",") {
		s, ok := Scenarios[strings.ToUpper(strings.TrimSpace(id))]
		if !ok {
			return nil, fmt.Errorf("unknown scenario %q; known: %s", id, strings.Join(ScenarioIDs(), ", "))
		}
		out = append(out, s)
	}
	return out, nil
}
