package scalebench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testenv/audit"
	"github.com/reloader-operator/reloader/internal/testenv/proc"
	"github.com/reloader-operator/reloader/tools/internal/loadtest"
)

// Config is one benchmark run.
type Config struct {
	// Bin is the reloader binary; Args are added to its command line, Env to its environment
	// (GOMEMLIMIT, say).
	Bin  string
	Args []string
	Env  []string
	// QPS and Burst are passed as --kube-api-qps and --kube-api-burst when above 0.
	QPS   float64
	Burst int

	ConfigMaps, Secrets, Deployments int
	// Shared Deployments (in a namespace of their own) all use SharedConfigMap.
	Shared     int
	Namespaces int
	// SourceBytes is the size of each ConfigMap's and Secret's data.
	SourceBytes int
	// Changes ConfigMaps are changed, ChangeRate per second.
	Changes    int
	ChangeRate float64
	// ChangesAfterReady, when above 0, starts the changes that long after reloader is ready,
	// while its first-sight records are still being written, instead of after the last of them.
	ChangesAfterReady time.Duration
	// PacedArgs, when set, run the fan-out again with reloader started with them added
	// (e.g. --reload-rate=100); PacedRate is the rate they configure, to compare with.
	PacedArgs []string
	PacedRate float64
	// Workers create the objects at once.
	Workers int
	// CRDDir, when set, holds the ReloaderConfig CRD to install first, as the chart does; unset,
	// the control plane serves no ReloaderConfig API, as after a drop-in swap of upstream.
	CRDDir string
	// Replicas, above 1, run that many replicas with --shards=Shards instead of one.
	Replicas, Shards int
	// Out receives progress lines; the figures are returned.
	Out io.Writer
}

// Figures are what a run measured.
type Figures struct {
	Objects       struct{ ConfigMaps, Secrets, Deployments, Shared int }
	SetupDuration time.Duration
	// FullCacheBytes is the JSON size of every ConfigMap, Secret and Deployment as listed.
	FullCacheBytes map[string]int64
	QPS            string
	// ConfigAPI says whether the ReloaderConfig API was served (Config.CRDDir).
	ConfigAPI bool

	// FirstSight is the start: process start to ready, the writes recording each Deployment
	// and when the last of them landed.
	Ready            time.Duration
	FirstSightWrites int
	FirstSight       time.Duration
	AfterSync        Memory

	Changes         int
	Expected        int
	Reloads         int
	Missed          int
	Duplicates      int
	ReloadsPerSec   float64
	APIPerReload    float64
	WritesPerReload float64
	LatencyP50      time.Duration
	LatencyP95      time.Duration
	LatencyP99      time.Duration
	// DuringFirstSight says the changes started Config.ChangesAfterReady after ready;
	// AfterFirstSight is then the latency of the same changes made again after the last
	// first record.
	DuringFirstSight time.Duration
	AfterFirstSight  *Latency
	DuringChanges    Memory
	ChangeAPI        loadtest.API

	// Replicas are each replica's share when several ran (Config.Replicas).
	Replicas []Replica

	FanOut      FanOut
	Paced       *FanOut
	ListsAfter  int // LISTs and watch lists (sendInitialEvents=true) after sync
	RequestsAll loadtest.API
	End         Memory
}

// Latency is a burst of changes' change-to-patch latency.
type Latency struct {
	P50, P95, P99      time.Duration
	Missed, Duplicates int
}

// FanOut is the reload of every Deployment of the shared ConfigMap.
type FanOut struct {
	Workloads, Patched int
	// Duration runs from the change to the last patch; Rate is the patches per second
	// observed from the first to the last.
	Duration time.Duration
	Rate     float64
	Args     []string
	Error    string `json:",omitempty"`
}

const user = "scalebench-reloader"

// Run builds the cluster, starts reloader and measures it.
func Run(ctx context.Context, cfg Config) (*Figures, error) {
	if cfg.Replicas > 1 && (cfg.Shards < 1 || len(cfg.PacedArgs) > 0) {
		return nil, fmt.Errorf("%d replicas need --shards, and run no paced fan-out", cfg.Replicas)
	}
	f := &Figures{FullCacheBytes: map[string]int64{}, ConfigAPI: cfg.CRDDir != ""}
	f.Objects.ConfigMaps, f.Objects.Secrets, f.Objects.Deployments, f.Objects.Shared = cfg.ConfigMaps, cfg.Secrets, cfg.Deployments, min(cfg.Shared, cfg.Deployments)
	progress := func(format string, args ...any) {
		fmt.Fprintf(cfg.Out, "[%s] %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	dir, err := os.MkdirTemp("", "scalebench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	policy, auditLog := filepath.Join(dir, "audit-policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(loadtest.AuditPolicy(user)), 0o644); err != nil {
		return nil, err
	}
	progress("starting etcd and kube-apiserver")
	opts := testenv.Options{APIServerFlags: map[string]string{
		"audit-policy-file": policy, "audit-log-path": auditLog, "audit-log-format": "json"}}
	if cfg.CRDDir != "" {
		opts.CRDDirectoryPaths = []string{cfg.CRDDir}
	}
	cluster, err := testenv.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer cluster.Stop()
	admin := rest.CopyConfig(cluster.Config)
	admin.QPS, admin.Burst = 5000, 10000
	cl, err := client.NewWithWatch(admin, client.Options{})
	if err != nil {
		return nil, err
	}
	nss := layout(cfg)
	uses := users(nss)
	progress("creating %d ConfigMaps, %d Secrets (%d bytes each) and %d Deployments in %d namespaces", cfg.ConfigMaps, cfg.Secrets, cfg.SourceBytes, cfg.Deployments, len(nss))
	start := time.Now()
	for _, batch := range objects(nss, cfg.SourceBytes) {
		if err := createAll(ctx, cl, batch, max(cfg.Workers, 1)); err != nil {
			return nil, err
		}
	}
	f.SetupDuration = time.Since(start)
	progress("created in %s", f.SetupDuration.Round(time.Second))

	obs, err := loadtest.Observe(ctx, cl)
	if err != nil {
		return nil, err
	}
	// Waits scale with the size: first records go at 50/s by default.
	long := max(5*time.Minute, time.Duration(cfg.Deployments)*time.Second/20)
	if err := loadtest.Poll(ctx, long, func() bool { return obs.Seen() >= cfg.Deployments }); err != nil {
		return nil, fmt.Errorf("observer saw %d of %d Deployments: %w", obs.Seen(), cfg.Deployments, err)
	}
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	for name, path := range map[string]string{"configmaps": "/api/v1/configmaps", "secrets": "/api/v1/secrets", "deployments": "/apis/apps/v1/deployments"} {
		if f.FullCacheBytes[name], err = listBytes(ctx, cs.CoreV1().RESTClient(), path); err != nil {
			return nil, err
		}
	}

	_, kubeconfig, err := cluster.AddUser(user, "system:masters")
	if err != nil {
		return nil, err
	}
	events := func() []audit.Event { ev, _ := audit.Read(auditLog, user); return ev }
	args := slices.Clone(cfg.Args)
	if cfg.QPS > 0 {
		args = append(args, "--kube-api-qps="+strconv.FormatFloat(cfg.QPS, 'f', -1, 64))
	}
	if cfg.Burst > 0 {
		args = append(args, "--kube-api-burst="+strconv.Itoa(cfg.Burst))
	}
	f.QPS = "binary defaults"
	if cfg.QPS > 0 || cfg.Burst > 0 {
		f.QPS = fmt.Sprint(args[len(cfg.Args):])
	}
	logFile, err := os.Create(filepath.Join(dir, "reloader.log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	progress("starting %s %v", filepath.Base(cfg.Bin), args)
	rs := []*reloader{}
	if cfg.Replicas > 1 {
		progress("%d replicas with --shards=%d", cfg.Replicas, cfg.Shards)
		rs, err = startReplicas(ctx, cfg, cluster, cl, long, args, kubeconfig, logFile)
	} else {
		var r *reloader
		r, err = startReloader(ctx, cfg.Bin, long, args, cfg.Env, kubeconfig, logFile)
		rs = append(rs, r)
	}
	if err != nil {
		return nil, err
	}
	r := rs[0]
	defer func() {
		r.p.Stop()
		for _, o := range rs[1:] {
			o.p.Stop()
		}
	}()
	f.Ready = time.Since(r.started)
	if cfg.ChangesAfterReady > 0 {
		f.DuringFirstSight = cfg.ChangesAfterReady
		progress("ready after %s; changes start in %s, while first sight is written", f.Ready.Round(time.Millisecond), cfg.ChangesAfterReady)
		if err := sleep(ctx, cfg.ChangesAfterReady); err != nil {
			return nil, err
		}
		if err := changeBurst(ctx, cfg, 1, f, cl, nss, uses, obs, rs, events, progress); err != nil {
			return nil, err
		}
	}
	progress("ready after %s; waiting for the first sight of %d Deployments", f.Ready.Round(time.Millisecond), cfg.Deployments)
	// Recorded on the workloads (a patch each) or in the ledger of first records.
	allRecorded := time.Now()
	_ = loadtest.Poll(ctx, long, func() bool {
		n, _ := recordedDeployments(ctx, cl, "")
		allRecorded = time.Now()
		return n >= cfg.Deployments
	})
	quiet(ctx, events)
	var last time.Time
	f.FirstSightWrites, last = workloadWrites(events(), r.started, time.Now())
	f.FirstSight = allRecorded.Sub(r.started)
	if last.After(allRecorded) {
		f.FirstSight = last.Sub(r.started)
	}
	synced := time.Now()
	if f.AfterSync, err = r.sample(); err != nil {
		return nil, err
	}
	progress("first sight: %d writes in %s; after sync: %s", f.FirstSightWrites, f.FirstSight.Round(time.Millisecond), f.AfterSync)
	if len(rs) > 1 {
		f.Replicas = shares(rs)
	}

	if cfg.ChangesAfterReady <= 0 {
		if err := changeBurst(ctx, cfg, 1, f, cl, nss, uses, obs, rs, events, progress); err != nil {
			return nil, err
		}
	} else {
		// The same changes again once the first records are written: the latency without them,
		// on the same machine at the same time, to compare with.
		during := *f
		if err := changeBurst(ctx, cfg, 2, f, cl, nss, uses, obs, rs, events, progress); err != nil {
			return nil, err
		}
		f.AfterFirstSight = &Latency{P50: f.LatencyP50, P95: f.LatencyP95, P99: f.LatencyP99, Missed: f.Missed, Duplicates: f.Duplicates}
		after := f.AfterFirstSight
		*f = during
		f.AfterFirstSight = after
	}
	f.FanOut = fanOut(ctx, cl, nss[0], 1, obs, args, progress)
	if len(cfg.PacedArgs) > 0 {
		r.p.Stop()
		paced := append(slices.Clone(args), cfg.PacedArgs...)
		progress("restarting reloader with %v", cfg.PacedArgs)
		var fo FanOut
		if pr, err := startReloader(ctx, cfg.Bin, long, paced, cfg.Env, kubeconfig, logFile); err != nil {
			fo = FanOut{Args: paced, Error: err.Error()}
		} else {
			r = pr
			quiet(ctx, events)
			fo = fanOut(ctx, cl, nss[0], 2, obs, paced, progress)
		}
		f.Paced = &fo
	}
	quiet(ctx, events)
	all := events()
	f.ListsAfter = window(all, synced, time.Now()).ListEquivalents() // LISTs and watch lists alike
	f.RequestsAll = window(all, time.Time{}, time.Now())
	f.End, _ = r.sample()
	return f, nil
}

// changeBurst changes cfg.Changes ConfigMaps, each used by some Deployments, at
// cfg.ChangeRate, and measures the reloads that follow.
func changeBurst(ctx context.Context, cfg Config, version int, f *Figures, cl client.Client, nss []namespace, uses map[string][]string,
	obs *loadtest.Observer, rs []*reloader, events func() []audit.Event, progress func(string, ...any)) error {
	type change struct {
		ns, name string
		at       time.Time
	}
	var changes []change
	for k := 0; len(changes) < cfg.Changes && k < cfg.ConfigMaps; k++ {
		for _, ns := range nss[1:] {
			if len(changes) < cfg.Changes && 2*k < ns.regular() && len(uses["ConfigMap/"+ns.name+"/"+configMapName(2*k)]) > 0 {
				changes = append(changes, change{ns: ns.name, name: configMapName(2 * k)})
			}
		}
	}
	f.Changes = len(changes)
	f.Reloads, f.Missed, f.Duplicates = 0, 0, 0
	var mu sync.Mutex
	samples := make([][]Memory, len(rs))
	sampling, stopSampling := context.WithCancel(ctx)
	go func() {
		for sampling.Err() == nil {
			for i, r := range rs {
				if m, err := r.sample(); err == nil {
					mu.Lock()
					samples[i] = append(samples[i], m)
					mu.Unlock()
				}
			}
			_ = sleep(sampling, time.Second)
		}
	}()
	progress("changing %d ConfigMaps at %.0f/s", len(changes), cfg.ChangeRate)
	from := time.Now()
	tick := time.NewTicker(time.Duration(float64(time.Second) / max(cfg.ChangeRate, 1)))
	for i := range changes {
		<-tick.C
		c := &changes[i]
		if err := patchData(ctx, cl, c.ns, c.name, cfg.SourceBytes, version); err != nil {
			tick.Stop()
			stopSampling()
			return err
		}
		c.at = time.Now()
	}
	tick.Stop()
	// Each Deployment expects a reload after the last change of the sources it uses.
	want := map[string]time.Time{}
	for _, c := range changes {
		for _, d := range uses["ConfigMap/"+c.ns+"/"+c.name] {
			want["Deployment/"+d] = c.at
		}
	}
	f.Expected = len(want)
	settled := func() bool {
		seen := obs.Changes()
		for key, at := range want {
			if t := seen[key]; len(t) == 0 || t[len(t)-1].Before(at) {
				return false
			}
		}
		return true
	}
	_ = loadtest.Poll(ctx, max(2*time.Minute, time.Duration(cfg.Changes)*time.Second/2), settled)
	_ = sleep(ctx, 2*time.Second) // room for late duplicates
	to := time.Now()
	stopSampling()
	mu.Lock()
	f.DuringChanges = peak(samples[0])
	for i := range f.Replicas {
		f.Replicas[i].DuringChanges = peak(samples[i])
	}
	mu.Unlock()

	var latencies []time.Duration
	var lastReload time.Time
	seen := obs.Changes()
	for key, at := range want {
		var after []time.Time
		for _, t := range seen[key] {
			if !t.Before(from) {
				after = append(after, t)
			}
		}
		switch {
		case len(after) == 0:
			f.Missed++
			continue
		case len(after) > 1:
			f.Duplicates += len(after) - 1
		}
		f.Reloads += len(after)
		latencies = append(latencies, after[0].Sub(at))
		if last := after[len(after)-1]; last.After(lastReload) {
			lastReload = last
		}
	}
	slices.Sort(latencies)
	f.LatencyP50, f.LatencyP95, f.LatencyP99 = percentile(latencies, 0.5), percentile(latencies, 0.95), percentile(latencies, 0.99)
	if s := lastReload.Sub(from).Seconds(); s > 0 {
		f.ReloadsPerSec = float64(f.Reloads) / s
	}
	f.ChangeAPI = window(events(), from, to)
	writes, _ := workloadWrites(events(), from, to)
	if f.Reloads > 0 {
		f.APIPerReload = float64(f.ChangeAPI.Total) / float64(f.Reloads)
		f.WritesPerReload = float64(writes) / float64(f.Reloads)
	}
	progress("%d reloads of %d expected, %d missed; p50 %s, p95 %s, p99 %s; during changes: %s", f.Reloads, f.Expected, f.Missed,
		f.LatencyP50.Round(time.Millisecond), f.LatencyP95.Round(time.Millisecond), f.LatencyP99.Round(time.Millisecond), f.DuringChanges)
	return nil
}

// fanOut changes the shared ConfigMap to version and waits until every Deployment of ns
// is patched.
func fanOut(ctx context.Context, cl client.Client, ns namespace, version int, obs *loadtest.Observer, args []string, progress func(string, ...any)) FanOut {
	fo := FanOut{Workloads: ns.deployments, Args: args}
	if ns.deployments == 0 {
		return fo
	}
	progress("fan-out: changing %s/%s, used by %d Deployments", ns.name, SharedConfigMap, ns.deployments)
	if err := patchData(ctx, cl, ns.name, SharedConfigMap, 64, version); err != nil {
		fo.Error = err.Error()
		return fo
	}
	at := time.Now()
	patched := func() []time.Time {
		seen := obs.Changes()
		var out []time.Time
		for k := range ns.deployments {
			for _, t := range seen["Deployment/"+ns.name+"/"+deploymentName(k)] {
				if t.After(at) {
					out = append(out, t)
					break
				}
			}
		}
		return out
	}
	_ = loadtest.Poll(ctx, 10*time.Minute, func() bool { return len(patched()) >= ns.deployments })
	times := patched()
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	fo.Patched = len(times)
	if len(times) > 0 {
		fo.Duration = times[len(times)-1].Sub(at)
		if s := times[len(times)-1].Sub(times[0]).Seconds(); s > 0 {
			fo.Rate = float64(len(times)-1) / s
		}
	}
	progress("fan-out: %d of %d patched in %s (%.0f/s)", fo.Patched, fo.Workloads, fo.Duration.Round(time.Millisecond), fo.Rate)
	return fo
}

// patchData writes a new version of a ConfigMap's data.
func patchData(ctx context.Context, cl client.Client, ns, name string, size, version int) error {
	cm := configMap(ns, name, size)
	cm.Data = payload(size, version)
	body := []byte(`{"data":{"config":` + strconv.Quote(cm.Data["config"]) + `}}`)
	if err := cl.Patch(ctx, cm, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("change ConfigMap %s/%s: %w", ns, name, err)
	}
	return nil
}

// createAll creates objs with workers at once.
func createAll(ctx context.Context, cl client.Client, objs []client.Object, workers int) error {
	work := make(chan client.Object)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range work {
				if err := cl.Create(ctx, o); client.IgnoreAlreadyExists(err) != nil {
					select {
					case errs <- fmt.Errorf("create %s/%s: %w", o.GetNamespace(), o.GetName(), err):
					default:
					}
				}
			}
		}()
	}
	for _, o := range objs {
		select {
		case work <- o:
		case err := <-errs:
			close(work)
			wg.Wait()
			return err
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// reloader is the process under test.
type reloader struct {
	p          *proc.Process
	metricsURL string
	started    time.Time
}

func (r *reloader) sample() (Memory, error) { return sample(r.p.Pid(), r.metricsURL) }

// startReloader runs bin and waits until it serves /ready.
func startReloader(ctx context.Context, bin string, timeout time.Duration, args, env []string, kubeconfig string, out io.Writer) (*reloader, error) {
	addr, err := proc.FreeAddr()
	if err != nil {
		return nil, err
	}
	r := &reloader{metricsURL: "http://" + addr, started: time.Now()}
	r.p, err = proc.Run(proc.Spec{Bin: bin, Args: append(slices.Clone(args), "--metrics-addr="+addr), Kubeconfig: kubeconfig, Out: out,
		Env: append([]string{"POD_NAME=scalebench"}, env...)})
	if err != nil {
		return nil, err
	}
	cl := http.Client{Timeout: 2 * time.Second}
	err = loadtest.Poll(ctx, timeout, func() bool {
		if exited(r.p.Pid()) {
			return true
		}
		resp, err := cl.Get(r.metricsURL + "/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if exited(r.p.Pid()) {
		r.p.Stop()
		return nil, fmt.Errorf("%s %v exited: %v (its log: reloader.log)", filepath.Base(bin), args, r.p.ProcessState())
	}
	if err != nil {
		r.p.Stop()
		return nil, fmt.Errorf("reloader not ready after %s", timeout)
	}
	return r, nil
}

// exited reports whether the child pid has exited and is waiting to be reaped.
func exited(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z'
}

// quiet waits until reloader has sent no request (watches aside) for 3 s, at most 2 minutes.
func quiet(ctx context.Context, events func() []audit.Event) {
	_ = loadtest.Poll(ctx, 2*time.Minute, func() bool {
		return window(events(), time.Now().Add(-3*time.Second), time.Now()).Total == 0
	})
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
