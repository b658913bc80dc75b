package loadtest

import (
	"context"
	"fmt"
	"time"
)

// The vs-upstream preset (`make bench-vs-upstream`): issue 35's four scenarios, run against
// upstream v1.4.21 and upstream v2 in turn, this build on the other side each time, and shown
// side by side by VsUpstream. --scenario=all leaves them out (they repeat S1, S6 and S15 at
// other sizes); --scenario=vs-upstream selects them.
const VsUpstreamSet = "U1,U2,U3,U4"

func init() {
	for id, s := range vsUpstreamScenarios {
		Scenarios[id] = s
	}
}

// isPreset tells a vs-upstream scenario from one of the design's.
func isPreset(id string) bool { _, ok := vsUpstreamScenarios[id]; return ok }

var vsUpstreamScenarios = map[string]Scenario{
	"U1": {ID: "U1", Title: "Burst: 10 ConfigMaps -> 10 Deployments, 200 writes at 10/s",
		Build: func(p Params) Spec {
			var b builder
			b.pairs(b.ns("u1"), "burst", p.N(10), 1, 256)
			return b.Spec
		},
		Drive: func(ctx context.Context, d *Driver, s Spec, p Params) error {
			return times(ctx, p.N(200), 100*time.Millisecond, func(i int) error { return d.Update(ctx, s.Sources[i%len(s.Sources)]) })
		}},
	"U2": {ID: "U2", Title: "FanOut: 1 ConfigMap -> 200 Deployments, 5 writes",
		Build: func(p Params) Spec {
			var b builder
			b.pairs(b.ns("u2"), "fan", 1, p.N(200), 256)
			b.zero()
			return b.Spec
		},
		Drive: func(ctx context.Context, d *Driver, s Spec, p Params) error {
			// 10 s apart: each write's 200 rollouts are done before the next.
			return times(ctx, 5, 10*time.Second, func(int) error { return d.Update(ctx, s.Sources[0]) })
		}},
	"U3": {ID: "U3", Title: "Memory: 5,000 ConfigMaps + 1,000 Secrets of 10 KiB, 2,000 Deployments, 200 writes",
		Build: func(p Params) Spec {
			var b builder
			ns := b.ns("u3")
			cms, secrets := p.N(5000), p.N(1000)
			for i := range cms {
				b.source(ConfigMap, ns, fmt.Sprintf("mem-cm-%d", i), 10<<10)
			}
			for i := range secrets {
				b.source(Secret, ns, fmt.Sprintf("mem-secret-%d", i), 10<<10)
			}
			for i := range p.N(2000) {
				b.workload(Deployment, ns, fmt.Sprintf("mem-%d", i), uses(b.Sources[i%cms]), uses(b.Sources[cms+i%secrets]))
			}
			b.zero()
			return b.Spec
		},
		Drive: func(ctx context.Context, d *Driver, s Spec, p Params) error {
			// ConfigMaps used by one Deployment each, spread over the 2,000, at 10 a second.
			used := min(len(s.Workloads), p.N(5000))
			return times(ctx, p.N(200), 100*time.Millisecond, func(i int) error {
				return d.Update(ctx, s.Sources[(i*97)%used])
			})
		}},
	"U4": {ID: "U4", Title: "ChurnRestart: SIGKILL mid-load, 50 busy and 50 quiet Deployments",
		Build: func(p Params) Spec {
			var b builder
			ns := b.ns("u4")
			b.pairs(ns, "busy", p.N(50), 1, 256)
			b.pairs(ns, "quiet", p.N(50), 1, 256)
			return b.Spec
		},
		Drive: func(ctx context.Context, d *Driver, s Spec, p Params) error {
			busy := changed("busy")(s)
			half := p.D(loadFor) / 2
			write := func(i int) error { return d.Update(ctx, busy[i%len(busy)]) }
			if err := every(ctx, half, 100*time.Millisecond, write); err != nil {
				return err
			}
			if err := d.KillRestart(ctx); err != nil {
				return err
			}
			return every(ctx, half, 100*time.Millisecond, write)
		}},
}

// times calls fn n times, interval apart (from the first call's start).
func times(ctx context.Context, n int, interval time.Duration, fn func(i int) error) error {
	start := time.Now()
	for i := range n {
		if i > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Until(start.Add(time.Duration(i) * interval))):
			}
		}
		if err := fn(i); err != nil {
			return err
		}
	}
	return nil
}
