package loadtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/ptr"
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
}

// Params size a run.
type Params struct {
	// Scale multiplies object counts.
	Scale int
	// Duration is how long timed scenarios drive load.
	Duration time.Duration
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

// periodic updates every source of the scenario each interval, for the run's duration.
func periodic(interval time.Duration) func(context.Context, *Driver, Spec, Params) error {
	return func(ctx context.Context, d *Driver, s Spec, p Params) error {
		return every(ctx, p.Duration, interval, func(int) error { return updateAll(ctx, d, s.Sources) })
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

// Scenarios are every scenario, by ID.
var Scenarios = map[string]Scenario{
	"S1": {ID: "S1", Title: "burst updates: each ConfigMap written 10 times in a second, repeatedly",
		Build: func(p Params) Spec {
			var b builder
			b.pairs(b.ns("s1"), "burst", 5*p.Scale, 2, 256)
			return b.Spec
		},
		Drive: func(ctx context.Context, d *Driver, s Spec, p Params) error {
			return every(ctx, p.Duration, 3*time.Second, func(int) error { return burst(ctx, d, s.Sources, 10, 100*time.Millisecond) })
		}},
	"S2": {ID: "S2", Title: "fan-out: one ConfigMap used by 50×scale Deployments",
		Build: func(p Params) Spec {
			var b builder
			b.pairs(b.ns("s2"), "shared", 1, 50*p.Scale, 256)
			return b.Spec
		},
		Drive: periodic(5 * time.Second)},
	"S3": {ID: "S3", Title: "many namespaces: 10×scale namespaces, a ConfigMap and a Secret each",
		Build: func(p Params) Spec {
			var b builder
			for i := range 10 * p.Scale {
				ns := b.ns(fmt.Sprintf("s3-%d", i))
				cm := b.source(ConfigMap, ns, "config", 256)
				sec := b.source(Secret, ns, "credentials", 128)
				b.workload(Deployment, ns, "api", uses(cm), uses(sec))
				b.workload(Deployment, ns, "worker", uses(cm))
			}
			return b.Spec
		},
		Drive: periodic(4 * time.Second)},
	"S4": {ID: "S4", Title: "no-op updates: labels, annotations and identical data only; nothing may reload",
		Build: func(p Params) Spec {
			var b builder
			b.pairs(b.ns("s4"), "noop", 5*p.Scale, 2, 256)
			return b.Spec
		},
		Drive: func(ctx context.Context, d *Driver, s Spec, p Params) error {
			return every(ctx, p.Duration, 200*time.Millisecond, func(i int) error { return d.Touch(ctx, s.Sources[i%len(s.Sources)], i) })
		}},
	"S5": {ID: "S5", Title: "workload churn: Deployments created and deleted while their ConfigMaps change",
		Build: func(p Params) Spec {
			var b builder
			b.pairs(b.ns("s5"), "churn", 3*p.Scale, 2, 256)
			return b.Spec
		},
		Drive: func(ctx context.Context, d *Driver, s Spec, p Params) error {
			var live []Workload
			return every(ctx, p.Duration, time.Second, func(i int) error {
				src := s.Sources[i%len(s.Sources)]
				w := Workload{Kind: Deployment, Namespace: src.Namespace, Name: fmt.Sprintf("churn-new-%d", i), Refs: []Ref{uses(src)}}
				if err := d.AddWorkload(ctx, w); err != nil {
					return err
				}
				live = append(live, w)
				if len(live) > 4 {
					if err := d.DeleteWorkload(ctx, live[0]); err != nil {
						return err
					}
					live = live[1:]
				}
				return d.Update(ctx, src)
			})
		}},
	"S6": {ID: "S6", Title: "controller restart mid-load; untouched workloads must not restart",
		Build: func(p Params) Spec {
			var b builder
			ns := b.ns("s6")
			b.pairs(ns, "busy", 5*p.Scale, 1, 256)
			b.pairs(ns, "quiet", 5*p.Scale, 1, 256)
			return b.Spec
		},
		Drive: func(ctx context.Context, d *Driver, s Spec, p Params) error {
			busy := changed("busy")(s)
			half := p.Duration / 2
			if err := every(ctx, half, time.Second, func(int) error { return updateAll(ctx, d, busy) }); err != nil {
				return err
			}
			if err := d.Restart(ctx); err != nil {
				return err
			}
			return every(ctx, half, time.Second, func(int) error { return updateAll(ctx, d, busy) })
		}},
	"S7": {ID: "S7", Title: "10 concurrent writers on shared ConfigMaps",
		Build: func(p Params) Spec {
			var b builder
			b.pairs(b.ns("s7"), "shared", 10*p.Scale, 1, 256)
			return b.Spec
		},
		Drive: func(ctx context.Context, d *Driver, s Spec, p Params) error {
			var wg sync.WaitGroup
			errs := make(chan error, 10)
			for w := range 10 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(w), 7))
					errs <- every(ctx, p.Duration, 150*time.Millisecond, func(int) error {
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
	"S8": {ID: "S8", Title: "large objects: 100 KiB ConfigMaps and 200 KiB Secrets",
		Build: func(p Params) Spec {
			var b builder
			ns := b.ns("s8")
			for i := range 5 * p.Scale {
				cm := b.source(ConfigMap, ns, fmt.Sprintf("big-cm-%d", i), 100<<10)
				sec := b.source(Secret, ns, fmt.Sprintf("big-secret-%d", i), 200<<10)
				b.workload(Deployment, ns, fmt.Sprintf("big-%d", i), uses(cm), uses(sec))
			}
			return b.Spec
		},
		Drive: periodic(3 * time.Second)},
	"S9": {ID: "S9", Title: "every workload kind: Deployment, StatefulSet, DaemonSet, CronJob, Job",
		Build: func(p Params) Spec {
			var b builder
			ns := b.ns("s9")
			for i := range p.Scale {
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
		Drive: periodic(5 * time.Second)},
	"S10": {ID: "S10", Title: "Secrets and mixed: a ConfigMap and a Secret changed together, then apart",
		Build: func(p Params) Spec {
			var b builder
			ns := b.ns("s10")
			for i := range 5 * p.Scale {
				cm := b.source(ConfigMap, ns, fmt.Sprintf("mixed-cm-%d", i), 256)
				sec := b.source(Secret, ns, fmt.Sprintf("mixed-secret-%d", i), 128)
				b.workload(Deployment, ns, fmt.Sprintf("mixed-%d", i), uses(cm), Ref{Source: sec, How: Volume})
			}
			return b.Spec
		},
		Drive: func(ctx context.Context, d *Driver, s Spec, p Params) error {
			return every(ctx, p.Duration, 3*time.Second, func(i int) error {
				if i%2 == 0 {
					return updateAll(ctx, d, s.Sources)
				}
				return updateAll(ctx, d, changed("mixed-secret")(s))
			})
		}},
	"S11": {ID: "S11", Title: "annotations reload strategy",
		Build: func(p Params) Spec {
			var b builder
			b.pairs(b.ns("s11"), "annotated", 5*p.Scale, 2, 256)
			b.Args = []string{"--reload-strategy=annotations"}
			return b.Spec
		},
		Drive: periodic(2 * time.Second)},
	"S12": {ID: "S12", Title: "pause-period: Deployments paused 5 s after each reload",
		Build: func(p Params) Spec {
			var b builder
			b.pairs(b.ns("s12"), "paused", 3*p.Scale, 1, 256)
			for i := range b.Workloads {
				b.Workloads[i].Annotations = map[string]string{"deployment.reloader.stakater.com/pause-period": "5s"}
			}
			return b.Spec
		},
		Drive: periodic(2 * time.Second)},
	"S13": {ID: "S13", Title: "complex references: init containers, valueFrom, volumes, projected volumes",
		Build: func(p Params) Spec {
			var b builder
			ns := b.ns("s13")
			for i := range 3 * p.Scale {
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
		Drive: func(ctx context.Context, d *Driver, s Spec, p Params) error {
			return every(ctx, p.Duration, 3*time.Second, func(i int) error { return d.Update(ctx, s.Sources[i%len(s.Sources)]) })
		}},
	"S14": {ID: "S14", Title: "change while down: sources changed while the controller is stopped",
		Build: func(p Params) Spec {
			var b builder
			ns := b.ns("s14")
			b.pairs(ns, "changed", 5*p.Scale, 1, 256)
			b.pairs(ns, "unchanged", 5*p.Scale, 1, 256)
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
			return sleep(ctx, p.Duration/2)
		}},
	"S15": {ID: "S15", Title: "memory at scale: 1000×scale 10 KiB ConfigMaps and Secrets, 100×scale Deployments",
		Build: func(p Params) Spec {
			var b builder
			ns := b.ns("s15")
			for i := range 500 * p.Scale {
				b.source(ConfigMap, ns, fmt.Sprintf("bulk-cm-%d", i), 10<<10)
				b.source(Secret, ns, fmt.Sprintf("bulk-secret-%d", i), 10<<10)
			}
			for i := range 100 * p.Scale {
				b.workload(Deployment, ns, fmt.Sprintf("bulk-%d", i), uses(b.Sources[2*i]), uses(b.Sources[2*i+1]))
				b.Workloads[len(b.Workloads)-1].Replicas = ptr.To[int32](0)
			}
			return b.Spec
		},
		Drive: func(ctx context.Context, d *Driver, s Spec, p Params) error {
			return every(ctx, p.Duration, 2*time.Second, func(i int) error { return d.Update(ctx, s.Sources[(i*2)%(200*p.Scale)]) })
		}},
	"S16": {ID: "S16", Title: "ReloaderConfigs: 10×scale configs, each selecting 10 unannotated Deployments by label",
		Build: func(p Params) Spec { return grouped("s16", 10*p.Scale, true) },
		Drive: configGroups},
	"S17": {ID: "S17", Title: "S16's shape with the auto annotation instead of ReloaderConfigs, to compare",
		Build: func(p Params) Spec { return grouped("s17", 10*p.Scale, false) },
		Drive: configGroups},
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
	return every(ctx, p.Duration, time.Second, func(i int) error {
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
	if spec == "" || spec == "all" {
		spec = strings.Join(ScenarioIDs(), ",")
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
