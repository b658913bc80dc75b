package loadtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/tools/internal/loadtest/faults"
)

// Driver makes a scenario's changes and books, for every workload, the content writes that
// concern it: the expectation the sides are judged against.
type Driver struct {
	client     client.Client
	controller *Controller
	progress   func(string)
	// proxy is the fault proxy, when the scenario has one.
	proxy *faults.Proxy
	// existing is set on an existing cluster (--kubeconfig): its nodes are not the load
	// test's to cordon.
	existing bool
	// faultsOn and faultsOff are when the scenario turned faults on and off.
	faultsOn, faultsOff time.Time

	mu       sync.Mutex
	versions map[string]int
	users    map[string]map[string]bool // source key -> workload keys using it
	writes   map[string][]time.Time     // workload key -> starts of the content writes it must follow
	// contents is, per workload key, which content each booked write left its source with,
	// for the judge's content checks (ContentLog).
	contents map[string][]ContentWrite
	created  map[string]Workload
	deleted  map[string]bool
	// marks are the times of the scenario's phases (Mark), figures what it measured on
	// the way (Figure): both reach the scenario's checks and result.
	marks   map[string]time.Time
	figures []CheckFigure
}

func newDriver(c client.Client, spec Spec, ctl *Controller, proxy *faults.Proxy, progress func(string)) *Driver {
	d := &Driver{client: c, controller: ctl, proxy: proxy, progress: progress, versions: map[string]int{},
		users: map[string]map[string]bool{}, writes: map[string][]time.Time{}, contents: map[string][]ContentWrite{}, created: map[string]Workload{}, deleted: map[string]bool{},
		marks: map[string]time.Time{}}
	for _, w := range spec.Workloads {
		d.use(w)
	}
	return d
}

func (d *Driver) use(w Workload) {
	for _, r := range w.Refs {
		k := r.Source.Key()
		if d.users[k] == nil {
			d.users[k] = map[string]bool{}
		}
		d.users[k][w.Key()] = true
	}
}

// Update writes new content into s.
func (d *Driver) Update(ctx context.Context, s Source) error {
	d.mu.Lock()
	d.versions[s.Key()]++
	version := d.versions[s.Key()]
	d.mu.Unlock()
	return d.WriteAs(ctx, s, version, "")
}

// WriteAs writes the content of the given version into s as field manager manager (""
// for the client's default): two writers with their own managers, as two controllers
// fighting over one Secret are. The write is booked for s's users: the content must differ
// from what s holds.
func (d *Driver) WriteAs(ctx context.Context, s Source, version int, manager string) error {
	var opts []client.UpdateOption
	if manager != "" {
		opts = append(opts, client.FieldOwner(manager))
	}
	start, err := d.write(ctx, s, func(o client.Object) { setData(o, data(s.Size, version)) }, opts...)
	if err != nil {
		return err
	}
	d.book(s, start, version)
	return nil
}

// Recreate deletes s and creates it again with new content: both writes concern its users
// (a build reloads on the delete with --reload-on-delete, on the create with
// --reload-on-create; one reload after the create covers both).
func (d *Driver) Recreate(ctx context.Context, s Source) error {
	start := time.Now()
	if err := d.client.Delete(ctx, sourceObject(s, 0)); err != nil {
		return fmt.Errorf("delete %s: %w", s.Key(), err)
	}
	d.book(s, start, absent)
	d.mu.Lock()
	d.versions[s.Key()]++
	version := d.versions[s.Key()]
	d.mu.Unlock()
	start = time.Now()
	if err := d.client.Create(ctx, sourceObject(s, version)); err != nil {
		return fmt.Errorf("re-create %s: %w", s.Key(), err)
	}
	d.book(s, start, version)
	return nil
}

// absent is the content version of a deleted source.
const absent = -1

// ContentWrite is a booked write as the content checks see it: when it started, the source it
// wrote and the content version it left there (absent for a delete).
type ContentWrite struct {
	Start   time.Time
	Source  string
	Version int
}

// book records a write to s, started at start, that left s with content version, for every
// workload using s.
func (d *Driver) book(s Source, start time.Time, version int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for w := range d.users[s.Key()] {
		if !d.deleted[w] {
			d.writes[w] = append(d.writes[w], start)
			d.contents[w] = append(d.contents[w], ContentWrite{Start: start, Source: s.Key(), Version: version})
		}
	}
}

// ContentLog returns, per workload still present, the content its booked writes left.
func (d *Driver) ContentLog() map[string][]ContentWrite {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string][]ContentWrite, len(d.contents))
	for w, cs := range d.contents {
		if !d.deleted[w] {
			out[w] = append([]ContentWrite(nil), cs...)
		}
	}
	return out
}

// SetFaults turns the fault proxy's faults on.
func (d *Driver) SetFaults(cfg faults.Config) {
	if d.proxy == nil {
		return
	}
	d.progress("API faults on")
	d.proxy.Set(cfg)
	d.mu.Lock()
	d.faultsOn = time.Now()
	d.mu.Unlock()
}

// ClearFaults turns them off.
func (d *Driver) ClearFaults() {
	if d.proxy == nil {
		return
	}
	d.progress("API faults off")
	d.proxy.Clear()
	d.mu.Lock()
	d.faultsOff = time.Now()
	d.mu.Unlock()
}

// FaultWindow is when faults were on; zero times when they never were.
func (d *Driver) FaultWindow() (on, off time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.faultsOn, d.faultsOff
}

// Created returns the workloads created during the load.
func (d *Driver) Created() map[string]Workload {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.created)
}

// Touch changes only metadata of s, and writes the same data again: no reload is due.
func (d *Driver) Touch(ctx context.Context, s Source, n int) error {
	_, err := d.write(ctx, s, func(o client.Object) {
		ann := o.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann["loadtest/touched"] = fmt.Sprint(n)
		o.SetAnnotations(ann)
		l := o.GetLabels()
		l["loadtest-touch"] = fmt.Sprint(n % 7)
		o.SetLabels(l)
	})
	return err
}

// writeBackoff bounds the retries of a write that conflicts with a concurrent writer (S7's
// ten writers on a few sources): 12 tries within about 10 s.
var writeBackoff = wait.Backoff{Steps: 12, Duration: 10 * time.Millisecond, Factor: 1.8, Jitter: 0.5, Cap: 2 * time.Second}

// write changes s with a retry on conflict; it returns the start of the successful attempt.
func (d *Driver) write(ctx context.Context, s Source, change func(client.Object), opts ...client.UpdateOption) (time.Time, error) {
	var start time.Time
	err := retry.RetryOnConflict(writeBackoff, func() error {
		o := sourceObject(s, 0)
		if err := d.client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			return err
		}
		change(o)
		start = time.Now()
		return d.client.Update(ctx, o, opts...)
	})
	if err != nil {
		return start, fmt.Errorf("update %s: %w", s.Key(), err)
	}
	return start, nil
}

// AddWorkload creates w during the load.
func (d *Driver) AddWorkload(ctx context.Context, w Workload) error {
	if err := d.client.Create(ctx, workloadObject(w)); err != nil {
		return fmt.Errorf("create %s: %w", w.Key(), err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.use(w)
	d.created[w.Key()] = w
	return nil
}

// DeleteWorkload deletes w; nothing more is expected of it.
func (d *Driver) DeleteWorkload(ctx context.Context, w Workload) error {
	d.mu.Lock()
	d.deleted[w.Key()] = true
	delete(d.writes, w.Key())
	delete(d.contents, w.Key())
	d.mu.Unlock()
	if err := d.client.Delete(ctx, workloadObject(w), client.PropagationPolicy("Background")); err != nil {
		return fmt.Errorf("delete %s: %w", w.Key(), err)
	}
	return nil
}

// Restart stops the controller (SIGTERM) and starts it again.
func (d *Driver) Restart(ctx context.Context) error {
	d.progress("restarting controller")
	d.controller.Stop()
	return d.controller.Start(ctx)
}

// KillRestart kills the controller (SIGKILL) and starts it again.
func (d *Driver) KillRestart(ctx context.Context) error {
	d.progress("killing controller")
	d.controller.Kill()
	return d.controller.Start(ctx)
}

// StopController stops the controller until StartController.
func (d *Driver) StopController() {
	d.progress("controller stopped")
	d.controller.Stop()
}

// StartController starts the controller again.
func (d *Driver) StartController(ctx context.Context) error {
	d.progress("controller starting")
	return d.controller.Start(ctx)
}

// Cordon marks every node unschedulable (on) or schedulable again: while cordoned, the new
// pods of a rollout stay pending and a Deployment with a short progress deadline stalls, as
// it does on a content that keeps its pods from becoming ready.
func (d *Driver) Cordon(ctx context.Context, on bool) error {
	if d.existing {
		return errors.New("the scenario cordons every node: it runs on the local control plane only, not on an existing cluster")
	}
	var nodes corev1.NodeList
	if err := d.client.List(ctx, &nodes); err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		patch := client.MergeFrom(n.DeepCopy())
		n.Spec.Unschedulable = on
		if err := d.client.Patch(ctx, n, patch); err != nil {
			return fmt.Errorf("cordon %s: %w", n.Name, err)
		}
	}
	return nil
}

// Mark records the time of a phase of the scenario under name (the checks read it) and
// reports it on the terminal.
func (d *Driver) Mark(name string) {
	d.progress(name)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.marks[name] = time.Now()
}

// Marks returns the phases marked so far.
func (d *Driver) Marks() map[string]time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.marks)
}

// Figure records a figure the scenario measured while it ran (a state of the cluster at
// one moment, which the checks after the load can no longer see).
func (d *Driver) Figure(f CheckFigure) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.figures = append(d.figures, f)
}

// Figures returns the figures recorded.
func (d *Driver) Figures() []CheckFigure {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]CheckFigure(nil), d.figures...)
}

// Progress reports a phase of the drive on the terminal.
func (d *Driver) Progress(msg string) { d.progress(msg) }

// Expected returns, per workload still present, the content writes it must follow.
func (d *Driver) Expected() (writes map[string][]time.Time, tracked map[string]bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	writes = map[string][]time.Time{}
	tracked = map[string]bool{}
	for _, users := range d.users {
		for w := range users {
			if !d.deleted[w] {
				tracked[w] = true
			}
		}
	}
	for w, ts := range d.writes {
		writes[w] = append([]time.Time(nil), ts...)
	}
	return writes, tracked
}

// every runs fn every interval, on a schedule from its start (a slow fn does not slow the
// rate down unless it takes longer than the interval), until ctx ends or the duration is over.
func every(ctx context.Context, duration, interval time.Duration, fn func(i int) error) error {
	start := time.Now()
	end := start.Add(duration)
	for i := 0; time.Now().Before(end); i++ {
		if err := fn(i); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(start.Add(time.Duration(i+1) * interval))):
		}
	}
	return nil
}
