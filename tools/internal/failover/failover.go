// Package failover measures how fast sharded reloader replicas hand shards over, from outside
// as a user sees it: built reloader binaries run as processes against a local control plane,
// one namespace per ConfigMap and Deployment. Three hand-overs in a row:
//
//   - stop: one replica gets SIGTERM, and the ConfigMaps of its namespaces change at once;
//   - join: a replica starts, and the ConfigMaps of the namespaces whose shards move to it
//     change the moment its member Lease appears (the hand-over is under way);
//   - kill: one replica gets SIGKILL, and the ConfigMaps of its namespaces change at once.
//
// For each: how long until the moved shards are held by their new owners (the acquireTime the
// new owner wrote in each shard Lease, after the signal), and how long each change took to
// reach its Deployment's pod template (the reload), counted from the change.
// `make bench-failover` prints them (cmd/failoverbench); test/e2e asserts bounds on them.
package failover

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/ledger"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/shard"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/testenv/proc"
)

// Config is one run.
type Config struct {
	// Bin is the reloader binary; Config and Kubeconfig reach the control plane.
	Bin        string
	Config     *rest.Config
	Kubeconfig string
	Replicas   int
	Shards     int
	Namespaces int
	// Lease, Renew and Retry are the --leader-election-* timings; zero: the binary's defaults
	// (15s, 10s, 2s).
	Lease, Renew, Retry time.Duration
	// Args are more reloader flags.
	Args []string
	// Out takes the replicas' output; Log the progress (either may be nil).
	Out io.Writer
	Log func(format string, args ...any)
}

// Result is one hand-over.
type Result struct {
	Scenario string // "stop", "join" or "kill"
	// Shards is how many shards moved, Namespaces how many namespaces are in them (and
	// changed).
	Shards, Namespaces int
	// Taken is, from the signal (stop, kill) or the new member's Lease (join), until the last
	// moved shard's Lease was acquired by its new owner.
	Taken time.Duration
	// Reloads are, per namespace changed, from the change to the reload, sorted.
	Reloads []time.Duration
	// Missed counts the changes not reloaded within the run's deadline.
	Missed int
}

// Max and P50 of the reloads.
func (r Result) Max() time.Duration { return quantile(r.Reloads, 1) }
func (r Result) P50() time.Duration { return quantile(r.Reloads, 0.5) }

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(int(q*float64(len(d)-1)+0.5), len(d)-1)]
}

func (r Result) String() string {
	return fmt.Sprintf("%-5s %2d shards (%3d namespaces) moved: held by their new owners %6.2fs after; reloads p50 %5.2fs max %5.2fs after the change; missed %d",
		r.Scenario, r.Shards, r.Namespaces, r.Taken.Seconds(), r.P50().Seconds(), r.Max().Seconds(), r.Missed)
}

const (
	own    = "reloader-system"
	prefix = "reloader-shard" // the binary's default --shard-lease-prefix
	cmName = "app"
)

type run struct {
	Config
	cs       *kubernetes.Clientset
	space    shard.Space
	env      string
	replicas map[string]*proc.Process
	next     int
	round    int

	mu   sync.Mutex
	seen map[string]map[string]time.Time // namespace -> env value -> first seen in the template
}

// Run sets the namespaces up, starts the replicas, and measures stop, join and kill in turn.
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	if cfg.Log == nil {
		cfg.Log = func(string, ...any) {}
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	cs, err := kubernetes.NewForConfig(rest.CopyConfig(cfg.Config))
	if err != nil {
		return nil, err
	}
	space, err := shard.NewSpace(cfg.Shards)
	if err != nil {
		return nil, err
	}
	r := &run{Config: cfg, cs: cs, space: space, replicas: map[string]*proc.Process{}, seen: map[string]map[string]time.Time{},
		env: reload.EnvVarName(source.ID{Kind: source.ConfigMap, Name: cmName})}
	defer func() {
		for _, p := range r.replicas {
			p.Stop()
		}
	}()
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	r.watchTemplates(ctx)
	for range cfg.Replicas {
		if _, err := r.start(); err != nil {
			return nil, err
		}
	}
	if err := r.settled(ctx); err != nil {
		return nil, err
	}
	var out []Result
	for _, scenario := range []func(context.Context) (Result, error){r.stop, r.join, r.kill} {
		res, err := scenario(ctx)
		if err != nil {
			return out, err
		}
		cfg.Log("%s", res)
		out = append(out, res)
		if err := r.settled(ctx); err != nil {
			return out, err
		}
	}
	return out, nil
}

func (r *run) namespace(k int) string { return fmt.Sprintf("team-%03d", k) }

// setup creates the namespaces, each with a ConfigMap and a Deployment that reloads on it.
func (r *run) setup(ctx context.Context) error {
	if _, err := r.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: own}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return parallel(r.Namespaces, func(k int) error {
		ns := r.namespace(k)
		if _, err := r.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cmName}, Data: map[string]string{"round": "0"}}
		if _, err := r.cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return err
		}
		labels := map[string]string{"app": cmName}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cmName, Annotations: map[string]string{"reloader.stakater.com/auto": "true"}},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "app", Image: "busybox", EnvFrom: []corev1.EnvFromSource{{
						ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cmName}}}}}},
				}},
			},
		}
		_, err := r.cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
		return err
	})
}

// parallel runs f(0..n-1), 16 at once, and returns the first error.
func parallel(n int, f func(k int) error) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	sem := make(chan struct{}, 16)
	for k := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(k); err != nil {
				mu.Lock()
				first = cmp(first, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

func cmp(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// watchTemplates notes when each value of the reload env var first shows in each
// namespace's Deployment.
func (r *run) watchTemplates(ctx context.Context) {
	lw := toolscache.NewListWatchFromClient(r.cs.AppsV1().RESTClient(), "deployments", "", fields.Everything())
	inf := toolscache.NewSharedIndexInformer(lw, &appsv1.Deployment{}, 0, toolscache.Indexers{})
	note := func(o any) {
		d, ok := o.(*appsv1.Deployment)
		if !ok || len(d.Spec.Template.Spec.Containers) == 0 {
			return
		}
		now := time.Now()
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			if e.Name != r.env {
				continue
			}
			r.mu.Lock()
			if r.seen[d.Namespace] == nil {
				r.seen[d.Namespace] = map[string]time.Time{}
			}
			if _, ok := r.seen[d.Namespace][e.Value]; !ok {
				r.seen[d.Namespace][e.Value] = now
			}
			r.mu.Unlock()
		}
	}
	_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: note, UpdateFunc: func(_, o any) { note(o) }})
	go inf.Run(ctx.Done())
	toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
}

// start starts one more replica and returns its name (its identity in the Leases).
func (r *run) start() (string, error) {
	name := fmt.Sprintf("replica-%d", r.next)
	r.next++
	args := append([]string{fmt.Sprintf("--shards=%d", r.Shards), "--metrics-addr=0"}, r.Args...)
	if r.Lease > 0 {
		args = append(args, "--leader-election-lease-duration="+r.Lease.String(), "--leader-election-renew-deadline="+r.Renew.String(),
			"--leader-election-retry-period="+r.Retry.String())
	}
	p, err := proc.Run(proc.Spec{Bin: r.Bin, Kubeconfig: r.Kubeconfig, Prefix: name + " | ", Out: r.Out, Args: args,
		Env: []string{"POD_NAME=" + name, "POD_NAMESPACE=" + own}})
	if err != nil {
		return "", err
	}
	r.replicas[name] = p
	return name, nil
}

// leases returns the shard Leases by shard.
func (r *run) leases(ctx context.Context) (map[int]coordinationv1.Lease, error) {
	list, err := r.cs.CoordinationV1().Leases(own).List(ctx, metav1.ListOptions{LabelSelector: shard.ShardLabel})
	if err != nil {
		return nil, err
	}
	out := map[int]coordinationv1.Lease{}
	for _, l := range list.Items {
		if i, err := strconv.Atoi(l.Name[len(prefix)+1:]); err == nil && len(l.Name) > len(prefix) {
			out[i] = l
		}
	}
	return out, nil
}

func holderOf(l coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// holders maps each shard to the replica holding it.
func (r *run) holders(ctx context.Context) (map[int]string, error) {
	ls, err := r.leases(ctx)
	if err != nil {
		return nil, err
	}
	h := map[int]string{}
	for i, l := range ls {
		if who := holderOf(l); who != "" {
			h[i] = who
		}
	}
	return h, nil
}

// settled waits until the running replicas hold every shard in even shares and every
// Deployment carries its ConfigMap's content.
func (r *run) settled(ctx context.Context) error {
	deadline := time.Now().Add(5*time.Minute + 4*r.lease())
	for {
		ok, err := r.balanced(ctx)
		if err != nil {
			return err
		}
		if ok {
			if ok, err = r.reloadedAll(ctx); err != nil {
				return err
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			h, _ := r.holders(ctx)
			return fmt.Errorf("the replicas never settled: shards held %v", h)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (r *run) lease() time.Duration {
	if r.Lease > 0 {
		return r.Lease
	}
	return 15 * time.Second
}

func (r *run) balanced(ctx context.Context) (bool, error) {
	h, err := r.holders(ctx)
	if err != nil || len(h) != r.Shards {
		return false, err
	}
	count := map[string]int{}
	for _, who := range h {
		if r.replicas[who] == nil {
			return false, nil
		}
		count[who]++
	}
	share := r.Shards / len(r.replicas)
	for name := range r.replicas {
		if count[name] < share || count[name] > share+1 {
			return false, nil
		}
	}
	return true, nil
}

// reloadedAll reports whether every Deployment carries its ConfigMap's current content.
func (r *run) reloadedAll(ctx context.Context) (bool, error) {
	list, err := r.cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + cmName})
	if err != nil {
		return false, err
	}
	for _, cm := range list.Items {
		if len(cm.Namespace) < 5 || cm.Namespace[:5] != "team-" {
			continue
		}
		if cm.Data["round"] == "0" {
			d, err := r.cs.AppsV1().Deployments(cm.Namespace).Get(ctx, cmName, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if seen, err := r.recorded(ctx, d); err != nil || !seen {
				return false, err // not seen yet by its owner
			}
			continue
		}
		r.mu.Lock()
		_, ok := r.seen[cm.Namespace][hash.ConfigMap(&cm)]
		r.mu.Unlock()
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

// namespacesOf returns the namespaces of the given shards.
func (r *run) namespacesOf(shards map[int]bool) []string {
	var out []string
	for k := range r.Namespaces {
		if ns := r.namespace(k); shards[r.space.Of(ns)] {
			out = append(out, ns)
		}
	}
	return out
}

// change changes the ConfigMap of each namespace and returns when each change was sent and the
// content it carries.
func (r *run) change(ctx context.Context, namespaces []string) (map[string]time.Time, map[string]string, error) {
	r.round++
	at, want := map[string]time.Time{}, map[string]string{}
	var mu sync.Mutex
	err := parallel(len(namespaces), func(k int) error {
		ns := namespaces[k]
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cmName}, Data: map[string]string{"round": strconv.Itoa(r.round)}}
		sent := time.Now()
		got, err := r.cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		mu.Lock()
		at[ns], want[ns] = sent, hash.ConfigMap(got)
		mu.Unlock()
		return nil
	})
	return at, want, err
}

// await waits for the reloads of the changes, up to deadline, and fills res.
func (r *run) await(ctx context.Context, at map[string]time.Time, want map[string]string, deadline time.Duration, res *Result) {
	end := time.Now().Add(deadline)
	for {
		done := 0
		r.mu.Lock()
		for ns, v := range want {
			if _, ok := r.seen[ns][v]; ok {
				done++
			}
		}
		r.mu.Unlock()
		if done == len(want) || time.Now().After(end) || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for ns, v := range want {
		if seen, ok := r.seen[ns][v]; ok {
			res.Reloads = append(res.Reloads, seen.Sub(at[ns]))
		} else {
			res.Missed++
		}
	}
	slices.Sort(res.Reloads)
}

// taken waits until every shard in moved is held by someone other than from, and returns the
// latest acquireTime among them after since.
func (r *run) taken(ctx context.Context, moved map[int]bool, from string, since time.Time, deadline time.Duration) (time.Duration, error) {
	end := time.Now().Add(deadline)
	for {
		ls, err := r.leases(ctx)
		if err != nil {
			return 0, err
		}
		var last time.Time
		all := true
		for i := range moved {
			l := ls[i]
			who := holderOf(l)
			if who == "" || who == from || l.Spec.AcquireTime == nil || l.Spec.AcquireTime.Time.Before(since) {
				all = false
				break
			}
			if l.Spec.AcquireTime.Time.After(last) {
				last = l.Spec.AcquireTime.Time
			}
		}
		if all {
			return last.Sub(since), nil
		}
		if time.Now().After(end) {
			return 0, fmt.Errorf("shards %v not taken from %s within %v", keys(moved), from, deadline)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func keys(m map[int]bool) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// victim is the first running replica in name order, with its shards.
func (r *run) victim(ctx context.Context) (string, map[int]bool, error) {
	var names []string
	for n := range r.replicas {
		names = append(names, n)
	}
	slices.Sort(names)
	h, err := r.holders(ctx)
	if err != nil {
		return "", nil, err
	}
	mine := map[int]bool{}
	for i, who := range h {
		if who == names[0] {
			mine[i] = true
		}
	}
	return names[0], mine, nil
}

// stop: SIGTERM to a replica, its namespaces changed at once.
func (r *run) stop(ctx context.Context) (Result, error) {
	return r.leave(ctx, "stop", func(p *proc.Process) { p.Stop() })
}

// kill: SIGKILL to a replica, its namespaces changed at once.
func (r *run) kill(ctx context.Context) (Result, error) {
	return r.leave(ctx, "kill", func(p *proc.Process) { p.Kill() })
}

func (r *run) leave(ctx context.Context, scenario string, end func(*proc.Process)) (Result, error) {
	name, moved, err := r.victim(ctx)
	if err != nil {
		return Result{}, err
	}
	namespaces := r.namespacesOf(moved)
	res := Result{Scenario: scenario, Shards: len(moved), Namespaces: len(namespaces)}
	p := r.replicas[name]
	delete(r.replicas, name)
	r.Log("%s: %s, holding %d shards (%d namespaces)", scenario, name, len(moved), len(namespaces))
	signalled := time.Now()
	go end(p)
	at, want, err := r.change(ctx, namespaces)
	if err != nil {
		return res, err
	}
	deadline := 3*r.lease() + time.Minute
	if res.Taken, err = r.taken(ctx, moved, name, signalled, deadline); err != nil {
		return res, err
	}
	r.await(ctx, at, want, deadline, &res)
	p.Stop() // waits for the exit
	return res, nil
}

// join: a replica starts; when its member Lease appears, the namespaces of the shards that
// move to it change.
func (r *run) join(ctx context.Context) (Result, error) {
	before, err := r.holders(ctx)
	if err != nil {
		return Result{}, err
	}
	name, err := r.start()
	if err != nil {
		return Result{}, err
	}
	// Its member Lease names it among the members: the assignment every replica computes.
	var since time.Time
	var members []string
	for since.IsZero() {
		list, err := r.cs.CoordinationV1().Leases(own).List(ctx, metav1.ListOptions{LabelSelector: shard.GroupLabel})
		if err != nil {
			return Result{}, err
		}
		members = members[:0]
		for _, l := range list.Items {
			members = append(members, holderOf(l))
			if holderOf(l) == name {
				since = time.Now()
			}
		}
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		time.Sleep(20 * time.Millisecond)
	}
	moved := map[int]bool{}
	for _, i := range shard.Assign(r.space, members, name) {
		if before[i] != name {
			moved[i] = true
		}
	}
	namespaces := r.namespacesOf(moved)
	r.Log("join: %s, taking %d shards (%d namespaces)", name, len(moved), len(namespaces))
	res := Result{Scenario: "join", Shards: len(moved), Namespaces: len(namespaces)}
	at, want, err := r.change(ctx, namespaces)
	if err != nil {
		return res, err
	}
	deadline := 3*r.lease() + time.Minute
	if res.Taken, err = r.taken(ctx, moved, "", since, deadline); err != nil {
		return res, err
	}
	r.await(ctx, at, want, deadline, &res)
	return res, nil
}

// recorded reports whether reloader has recorded d: on it, or in its ledger of first records.
func (r *run) recorded(ctx context.Context, d *appsv1.Deployment) (bool, error) {
	if _, ok := d.Annotations[reload.RecordAnnotation]; ok {
		return true, nil
	}
	cms, err := r.cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: ledger.Label + "=" + d.Namespace})
	if err != nil {
		return false, err
	}
	for i := range cms.Items {
		if cms.Items[i].Name == ledger.Name(d.Namespace) && ledger.Holds(&cms.Items[i], d.UID) {
			return true, nil
		}
	}
	return false, nil
}
