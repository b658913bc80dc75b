package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	kruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testenv/audit"
	"github.com/reloader-operator/reloader/tools/internal/loadtest/faults"
)

// Config is one `loadtest run`.
type Config struct {
	Sides       []Side
	Scenarios   []Scenario
	Params      Params
	Parallelism int
	ResultsDir  string
	// Kubeconfig runs on an existing cluster instead of a local control plane per run.
	Kubeconfig string
	// MetricsAddrFlag: see Controller.
	MetricsAddrFlag string
	// Nodes is the number of fake kwok nodes of each local control plane.
	Nodes int
	// CRDDir holds the ReloaderConfig CRD installed into each local control plane; empty
	// installs none (scenarios with ReloaderConfigs then fail at setup).
	CRDDir string
	// Progress receives one line per phase.
	Progress io.Writer
}

// metricsAddrFlag is the flag that sets side's metrics address: its own, or the run's.
func (cfg Config) metricsAddrFlag(side Side) string {
	if side.MetricsAddrFlag != nil {
		return *side.MetricsAddrFlag
	}
	return cfg.MetricsAddrFlag
}

// Run runs every scenario, each side after the other on a fresh control plane, and writes one
// JSON result per scenario and side into ResultsDir.
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	for _, side := range cfg.Sides {
		if cfg.Parallelism > 1 && cfg.metricsAddrFlag(side) == "" {
			return nil, fmt.Errorf("the %s side (%s) takes no metrics-address flag and serves /metrics on the fixed port 9090: "+
				"its scenarios cannot run side by side (--parallelism must be 1)", side.Name, side.Bin)
		}
	}
	if err := os.MkdirAll(cfg.ResultsDir, 0o755); err != nil {
		return nil, err
	}
	if cfg.Progress != nil {
		// Cells running side by side write progress lines to one writer.
		cfg.Progress = &lockedWriter{w: cfg.Progress}
	}
	var mu sync.Mutex
	var results []Result
	work := make(chan Scenario)
	var wg sync.WaitGroup
	for range max(cfg.Parallelism, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sc := range work {
				// The sides of one scenario never run at the same time.
				for _, side := range cfg.Sides {
					if ctx.Err() != nil {
						break
					}
					r := runCell(ctx, cfg, sc, side)
					if err := writeJSON(filepath.Join(cfg.ResultsDir, sc.ID+"-"+side.Name+".json"), r); err != nil {
						r.Error = errors.Join(errors.New(r.Error), err).Error()
					}
					mu.Lock()
					results = append(results, r)
					mu.Unlock()
				}
			}
		}()
	}
	for _, sc := range cfg.Scenarios {
		if ctx.Err() != nil {
			break // interrupted: no new scenario starts
		}
		work <- sc
	}
	close(work)
	wg.Wait()
	sortResults(results)
	return results, ctx.Err()
}

// lockedWriter serialises writes.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// cell is one scenario run by one side.
type cell struct {
	cfg      Config
	sc       Scenario
	side     Side
	started  time.Time
	progress func(string)
}

func runCell(ctx context.Context, cfg Config, sc Scenario, side Side) Result {
	c := &cell{cfg: cfg, sc: sc, side: side, started: time.Now()}
	c.progress = func(msg string) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "[%-3s %-3s %6.1fs] %s\n", sc.ID, side.Name, time.Since(c.started).Seconds(), msg)
		}
	}
	r := Result{Scenario: sc.ID, Title: sc.Title, Side: side.Name, Binary: side.Bin, Build: describe(side.Bin),
		Scale: cfg.Params.scale(), DurationSeconds: cfg.Params.Duration.Seconds(), Cores: runtime.NumCPU()}
	start, startOK := loadAverage("/proc/loadavg")
	if err := c.run(ctx, &r); err != nil {
		r.Error = err.Error()
		c.progress("error: " + err.Error())
	}
	if end, endOK := loadAverage("/proc/loadavg"); startOK && endOK {
		r.LoadAvg = []float64{start, end}
	}
	r.Seconds = time.Since(c.started).Seconds()
	c.progress(fmt.Sprintf("done: %d reloads, %d missed, %d duplicates, %d unexpected", r.Reloads, r.Missed, r.Duplicates, r.Unexpected))
	return r
}

// ReconcileReturnWindow is how long after the load settled the reconcile rate may take to
// return to its rate before the load (the design's hot-loop check); the run looks that long
// at most.
const ReconcileReturnWindow = 60 * time.Second

func (c *cell) run(ctx context.Context, r *Result) error {
	dir := filepath.Join(c.cfg.ResultsDir, "runs", c.sc.ID+"-"+c.side.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(dir, "controller.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()

	spec := c.sc.Build(c.cfg.Params)
	user := "loadtest-" + c.side.Name
	admin, controllerKubeconfig, auditLog, proxy, stop, err := c.controlPlane(ctx, dir, user, &spec)
	defer stop()
	if err != nil {
		return err
	}
	cl, err := client.NewWithWatch(admin, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	c.progress(fmt.Sprintf("setup: %d namespaces, %d sources, %d workloads", len(spec.Namespaces), len(spec.Sources), len(spec.Workloads)))
	if err := setup(ctx, cl, spec); err != nil {
		return err
	}
	if c.cfg.Kubeconfig != "" {
		defer teardown(cl, spec)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	obs, err := Observe(watchCtx, cl)
	if err != nil {
		return err
	}
	if err := Poll(ctx, 60*time.Second+time.Duration(len(spec.Workloads))*10*time.Millisecond, func() bool { return obs.Seen() >= len(spec.Workloads) }); err != nil {
		return fmt.Errorf("observer saw %d of %d workloads: %w", obs.Seen(), len(spec.Workloads), err)
	}

	side := c.side
	side.Args = append(append([]string(nil), side.Args...), spec.Args...)
	// Upstream v2, run beside this build, binds :8080 for its probes and exits when it can't;
	// a build that serves v2's probes there too when it can is told not to.
	noV2Probes, _ := OwnArgs(side.Bin, []string{"--v2-health-addr=0"})
	side.Args = append(side.Args, noV2Probes...)
	if len(spec.OwnArgs) > 0 {
		given, left := OwnArgs(side.Bin, spec.OwnArgs)
		// After the side's own flags: the scenario's value wins (the flap breaker on, when
		// the run turns it off for the other scenarios).
		side.Args = append(side.Args, given...)
		if len(left) > 0 {
			c.progress(fmt.Sprintf("not in %s's --help, left out: %s", filepath.Base(side.Bin), strings.Join(left, " ")))
		}
	}
	ctl := &Controller{Side: side, Kubeconfig: controllerKubeconfig, MetricsAddrFlag: c.cfg.metricsAddrFlag(side), Out: logFile}
	c.progress("starting " + filepath.Base(side.Bin))
	runStart := time.Now()
	if err := ctl.Start(ctx); err != nil {
		return err
	}
	r.Build.Args = ctl.Args
	defer ctl.Stop()
	events := func() []audit.Event {
		if auditLog == "" {
			return nil
		}
		ev, _ := audit.Read(auditLog, user)
		return ev
	}
	startupTimeout := 60*time.Second + time.Duration(len(spec.Workloads))*20*time.Millisecond
	if auditLog != "" {
		c.progress("waiting for the controller's start-up requests to settle")
		_ = Poll(ctx, startupTimeout, func() bool {
			return rate(events(), time.Now().Add(-2*time.Second), time.Now()) == 0
		})
	} else {
		// No audit log on an existing cluster: the controller's own reconcile rate tells
		// when its start-up work is done (a binary without the counter reads 0 at once).
		c.progress("waiting for the controller's start-up reconciles to settle")
		_ = Poll(ctx, startupTimeout, func() bool {
			now := time.Now()
			return now.Sub(runStart) > 5*time.Second && reconcileRate(ctl.Samples(), window{now.Add(-4 * time.Second), now}) == 0
		})
	}
	idle := window{from: time.Now()}
	_ = sleep(ctx, 6*time.Second) // three scrapes: the reconcile rate at rest
	idle.to = time.Now()
	before := events()
	r.IdleRPSBefore, r.RepeatRPSBefore = rate(before, idle.from, idle.to), repeatRate(before, idle.from, idle.to)

	c.progress("driving load")
	d := newDriver(cl, spec, ctl, proxy, c.progress)
	d.existing = c.cfg.Kubeconfig != ""
	load := window{from: time.Now()}
	if err := c.sc.Drive(ctx, d, spec, c.cfg.Params); err != nil {
		return fmt.Errorf("drive: %w", err)
	}
	load.to = time.Now()
	writes, tracked := d.Expected()
	booked := 0
	for _, ws := range writes {
		booked += len(ws)
	}
	// A build that rolls once per write needs time in proportion to the writes booked.
	settleTimeout := min(20*time.Minute, 60*time.Second+load.to.Sub(load.from)+time.Duration(booked)*20*time.Millisecond)
	c.progress(fmt.Sprintf("waiting for reloads to land (%d writes booked on %d workloads; at most %v)", booked, len(writes), settleTimeout.Round(time.Second)))
	if err := Poll(ctx, settleTimeout, func() bool { return settled(writes, obs.Changes()) }); err != nil {
		r.NotSettled = true
	}
	settledAt := time.Now()
	_ = sleep(ctx, 2*time.Second) // room for late duplicates
	after := window{from: time.Now()}
	c.progress("measuring idle requests")
	_ = sleep(ctx, 5*time.Second)
	after.to = time.Now()

	// The design's hot-loop check: the reconcile rate returns to its rate before the load
	// within ReconcileReturnWindow of the load settling.
	if _, _, ok := ctl.Totals().first(reconcileMetrics...); ok {
		base := reconcileRate(ctl.Samples(), idle)
		r.Runtime.ReconcileBaseline = &base
		c.progress("waiting for the reconcile rate to return to its rate before the load")
		var back *float64
		_ = Poll(ctx, ReconcileReturnWindow+8*time.Second, func() bool {
			back = returnedAt(ctl.Samples(), settledAt, base, 6*time.Second)
			return back != nil || time.Since(settledAt) > ReconcileReturnWindow+6*time.Second
		})
		r.Runtime.ReconcileReturnSeconds, r.Runtime.ReconcileNotBack = back, back == nil
	}
	specs := map[string]Workload{}
	for _, w := range spec.Workloads {
		specs[w.Key()] = w
	}
	maps.Copy(specs, d.Created())
	changes := obs.Changes()
	if len(spec.Checks) > 0 {
		in := checkInput{tracked: tracked, specs: specs, changes: changes, marks: d.Marks(), samples: ctl.Samples()}
		if r.Checks, err = runChecks(ctx, cl, spec.Checks, in); err != nil {
			return fmt.Errorf("checks: %w", err)
		}
	}
	r.Checks = append(r.Checks, d.Figures()...)
	// A watch of the observer that could not resume counted the changes made meanwhile once
	// each and late: the figures of such a run are not reloader's alone.
	r.Checks = append(r.Checks, CheckFigure{Name: "observer watch gaps", Value: float64(obs.Gaps()), Max: ptr.To(0.0)})
	ctl.Stop()
	runEnd := time.Now()
	stopWatch()

	firstSigs, afterSigs := obs.Signatures()
	judge(r, writes, tracked, changes, &ContentTrace{Writes: d.ContentLog(), First: firstSigs, After: afterSigs})
	r.Holds = spec.Holds
	r.ReloadsPerSecond, r.SettleSeconds = throughput(writes, changes, load.to)
	if r.NotSettled {
		r.SettleSeconds = settleTimeout.Seconds()
	}
	totals := ctl.Totals()
	if auditLog != "" {
		ev := events()
		// The gates judge the requests from the start of the load on; those before it (caches
		// filled, first records written) are start-up, shown apart: a build that records each
		// workload at first sight and one that does not differ there by the workloads, not by
		// how they handle the load.
		startup, rest := splitAt(ev, load.from)
		api, startupAPI := CountAPI(rest), CountAPI(startup)
		r.API, r.APIStartup = &api, &startupAPI
		r.IdleRPSAfter, r.RepeatRPSAfter = rate(ev, after.from, after.to), repeatRate(ev, after.from, after.to)
	} else if len(totals.Client) > 0 {
		api := clientAPI(totals.Client)
		r.API = &api
	}
	r.CPUSeconds = ctl.CPUSeconds
	r.PeakRSSMiB = float64(ctl.PeakRSS) / (1 << 20)
	steady := window{from: load.from.Add(load.to.Sub(load.from) / 2), to: load.to}
	r.Usage = usage(ctl.Samples(), ctl.CPUSeconds, ctl.PeakRSS, window{runStart, runEnd}, steady, load.from)
	base, back, notBack := r.Runtime.ReconcileBaseline, r.Runtime.ReconcileReturnSeconds, r.Runtime.ReconcileNotBack
	r.Runtime = runtimeFigures(ctl.Samples(), totals, window{load.from, settledAt}, steady)
	r.Runtime.ReconcileBaseline, r.Runtime.ReconcileReturnSeconds, r.Runtime.ReconcileNotBack = base, back, notBack
	if proxy != nil {
		on, off := d.FaultWindow()
		fr := &FaultResult{Config: *spec.Faults, Proxy: proxy.Stats(), Seconds: off.Sub(on).Seconds()}
		if len(totals.Client) > 0 {
			n := 0.0
			for k, v := range totals.Client {
				if code := k[strings.LastIndexByte(k, ' ')+1:]; code == "429" || strings.HasPrefix(code, "5") {
					n += v
				}
			}
			fr.ClientErrors = &n
		}
		r.Faults = fr
	}
	return nil
}

// controlPlane starts a local control plane, or takes the existing cluster, and puts the fault
// proxy in front of it when the scenario has faults. It returns the driver's config, the
// controller's kubeconfig, the audit log ("" on an existing cluster), the proxy (nil without
// faults), and what stops them all.
func (c *cell) controlPlane(ctx context.Context, dir, user string, spec *Spec) (admin *rest.Config, controllerKubeconfig, auditLog string, proxy *faults.Proxy, stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	var controllerConfig *rest.Config
	if c.cfg.Kubeconfig == "" {
		auditLog = filepath.Join(dir, "audit.log")
		// The API server appends to its log: one left by an earlier run into the same results
		// directory would be counted as this run's start-up requests.
		if err := os.Remove(auditLog); err != nil && !os.IsNotExist(err) {
			return nil, "", "", nil, stop, err
		}
		c.progress("starting control plane")
		policy := filepath.Join(dir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(AuditPolicy(user)), 0o644); err != nil {
			return nil, "", "", nil, stop, err
		}
		cluster, err := testenv.Start(ctx, testenv.Options{Rollouts: true, Nodes: max(c.cfg.Nodes, 1), CRDDirectoryPaths: crdDirs(c.cfg.CRDDir),
			APIServerFlags: map[string]string{"audit-policy-file": policy, "audit-log-path": auditLog, "audit-log-format": "json"}})
		if err != nil {
			return nil, "", "", nil, stop, err
		}
		stops = append(stops, func() { _ = cluster.Stop() })
		admin = cluster.Config
		if controllerConfig, controllerKubeconfig, err = cluster.AddUser(user, "system:masters"); err != nil {
			return nil, "", "", nil, stop, err
		}
	} else {
		controllerKubeconfig = c.cfg.Kubeconfig
		if admin, err = clientcmd.BuildConfigFromFlags("", c.cfg.Kubeconfig); err != nil {
			return nil, "", "", nil, stop, err
		}
		controllerConfig = rest.CopyConfig(admin)
		// The driver writes at the scenario's rate, not client-go's default 5 a second.
		admin.QPS, admin.Burst = 1000, 2000
		prefixNamespaces(spec, "loadtest-"+c.side.Name+"-")
	}
	if spec.Faults != nil {
		if proxy, err = faults.Start(controllerConfig); err != nil {
			return nil, "", "", nil, stop, err
		}
		stops = append(stops, func() { _ = proxy.Close() })
		if controllerKubeconfig, err = proxy.Kubeconfig(dir, user); err != nil {
			return nil, "", "", nil, stop, err
		}
		c.progress("controller talks to the API server through the fault proxy at " + proxy.URL)
	}
	return admin, controllerKubeconfig, auditLog, proxy, stop, nil
}

func prefixNamespaces(s *Spec, prefix string) {
	for i := range s.Namespaces {
		s.Namespaces[i] = prefix + s.Namespaces[i]
	}
	for i := range s.Sources {
		s.Sources[i].Namespace = prefix + s.Sources[i].Namespace
	}
	for i := range s.Configs {
		s.Configs[i].Namespace = prefix + s.Configs[i].Namespace
		s.Configs[i].Source.Namespace = prefix + s.Configs[i].Source.Namespace
	}
	for i := range s.Workloads {
		s.Workloads[i].Namespace = prefix + s.Workloads[i].Namespace
		for j := range s.Workloads[i].Refs {
			s.Workloads[i].Refs[j].Source.Namespace = prefix + s.Workloads[i].Refs[j].Source.Namespace
		}
	}
}

// Poll checks cond every 250 ms until it holds, ctx ends or timeout passes.
func Poll(ctx context.Context, timeout time.Duration, cond func() bool) error {
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond(), nil })
}

// loadAverage is the 1-minute load average, the first field of a /proc/loadavg file.
func loadAverage(path string) (float64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	return v, err == nil
}

func sortResults(rs []Result) {
	order := map[string]int{}
	for i, id := range ScenarioIDs() {
		order[id] = i
	}
	sideOrder := func(s string) int {
		if s == "old" {
			return 0
		}
		return 1
	}
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0; j-- {
			a, b := rs[j-1], rs[j]
			if order[a.Scenario] > order[b.Scenario] || order[a.Scenario] == order[b.Scenario] && sideOrder(a.Side) > sideOrder(b.Side) {
				rs[j-1], rs[j] = b, a
			}
		}
	}
}

func crdDirs(dir string) []string {
	if dir == "" {
		return nil
	}
	return []string{dir}
}

// scheme reads and writes the built-in kinds and ReloaderConfigs.
var scheme = func() *kruntime.Scheme {
	s := kruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}()
