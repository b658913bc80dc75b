package shard

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
)

// ShardLabel marks the Lease of each shard with the prefix of its install.
const ShardLabel = "reloader.dev/shard-of"

// Coordinator takes and gives up shards through Leases. Each replica renews a member Lease;
// the live members divide the shards among them (Assign); each shard assigned is
// acquired through its own Lease with client-go's leader election, so at most one replica
// holds it, and a dead replica's shards are taken within the lease duration. A shard assigned
// elsewhere (a replica joined) is first left unprocessed, then its Lease released, so the next
// owner starts only after this one stopped.
type Coordinator struct {
	Leases coordinationv1client.LeasesGetter
	// Namespaces are watched to name the owned ones to the API server.
	Namespaces corev1client.NamespacesGetter
	Namespace  string
	Prefix     string
	Identity   string
	Space      Space
	Filter     *Filter

	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Grace is how long a shard handed over stays unprocessed before its Lease is released:
	// reconciles already running finish first.
	Grace time.Duration
	Log   logr.Logger
	// Changed, when set, hears the owned shards after each change (metrics).
	Changed func(owned []int)

	mu        sync.Mutex
	electors  map[int]*elector
	releasing map[int]bool
	wg        sync.WaitGroup
	// electing is the context of every leader election: not the manager's, so that on
	// shutdown the shards are left unprocessed for the grace before their Leases go.
	electing context.Context
	// beating is whether this replica's last heartbeat went through: a replica that cannot
	// renew its own Lease does not judge others dead.
	beating bool
}

type elector struct {
	cancel context.CancelFunc
	done   chan struct{}

	// mu orders the start of leading and its end: client-go runs OnStartedLeading in a
	// goroutine of its own, which may run after OnStoppedLeading, or after the shard was
	// handed over; once stopped, a start takes nothing.
	mu      sync.Mutex
	stopped bool
}

// start runs take unless leading has stopped (or ctx, the term of leading, ended).
func (e *elector) start(ctx context.Context, take func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped || ctx.Err() != nil {
		return
	}
	take()
}

// stop ends leading for good, then runs give.
func (e *elector) stop(give func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stopped = true
	give()
}

// NeedLeaderElection is false: every replica takes its share.
func (c *Coordinator) NeedLeaderElection() bool { return false }

// Start runs until ctx ends, then releases every shard and its member Lease.
func (c *Coordinator) Start(ctx context.Context) error {
	c.electors, c.releasing = map[int]*elector{}, map[int]bool{}
	var stopElecting context.CancelFunc
	c.electing, stopElecting = context.WithCancel(context.Background())
	defer stopElecting()
	members, namespaces := c.memberInformer(), c.namespaceInformer()
	go members.Run(ctx.Done())
	go namespaces.Run(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), members.HasSynced, namespaces.HasSynced) {
		return ctx.Err()
	}
	c.Log.Info("sharding by namespace", "shards", c.Space.Shards(), "identity", c.Identity,
		"leaseNamespace", c.Namespace, "memberLease", memberLeaseName(c.Prefix, c.Identity))
	live := newLiveness(c.LeaseDuration)
	t := time.NewTicker(c.RetryPeriod)
	defer t.Stop()
	for {
		c.tick(ctx, members.GetStore(), live)
		select {
		case <-ctx.Done():
			c.stop(stopElecting)
			return nil
		case <-t.C:
		}
	}
}

// memberInformer watches the member Leases of this install: one watch, no periodic lists.
func (c *Coordinator) memberInformer() toolscache.SharedIndexInformer {
	selector := GroupLabel + "=" + c.Prefix
	leases := c.Leases.Leases(c.Namespace)
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return leases.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return leases.Watch(ctx, o)
		},
	}
	return toolscache.NewSharedIndexInformer(lw, &coordinationv1.Lease{}, 0, toolscache.Indexers{})
}

// namespaceInformer tells the filter of every namespace, by name only.
func (c *Coordinator) namespaceInformer() toolscache.SharedIndexInformer {
	ns := c.Namespaces.Namespaces()
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return ns.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return ns.Watch(ctx, o)
		},
	}
	inf := toolscache.NewSharedIndexInformer(lw, &corev1.Namespace{}, 0, toolscache.Indexers{})
	_ = inf.SetTransform(func(o any) (any, error) {
		if n, ok := o.(*corev1.Namespace); ok {
			return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n.Name, ResourceVersion: n.ResourceVersion}}, nil
		}
		return o, nil
	})
	_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if n, ok := o.(*corev1.Namespace); ok {
				c.Filter.NamespaceAdded(n.Name)
			}
		},
		DeleteFunc: func(o any) {
			if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if n, ok := o.(*corev1.Namespace); ok {
				c.Filter.NamespaceDeleted(n.Name)
			}
		},
	})
	return inf
}

// tick renews this replica's membership and brings the shards held in line with the
// assignment of the members alive now.
func (c *Coordinator) tick(ctx context.Context, store toolscache.Store, live *liveness) {
	c.heartbeat(ctx, store)
	var leases []*coordinationv1.Lease
	for _, o := range store.List() {
		leases = append(leases, o.(*coordinationv1.Lease))
	}
	alive, stale := live.observe(leases, time.Now())
	for _, lease := range stale {
		if !c.beating {
			break
		}
		// A replica gone without deleting its Lease (SIGKILL, node loss); only the Lease as
		// seen, so one renewed meanwhile stays.
		err := c.Leases.Leases(c.Namespace).Delete(ctx, lease.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{
			UID: &lease.UID, ResourceVersion: &lease.ResourceVersion}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			c.Log.Info("could not delete a dead member's Lease", "lease", lease.Name, "error", err.Error())
		}
	}
	mine := map[int]bool{}
	for _, i := range Assign(c.Space, alive, c.Identity) {
		mine[i] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range c.electors {
		select {
		case <-e.done: // lost its Lease; tried again below if still ours
			delete(c.electors, i)
			continue
		default:
		}
		if !mine[i] && !c.releasing[i] {
			c.release(ctx, i, e)
		}
	}
	for i := range mine {
		if _, running := c.electors[i]; !running && !c.releasing[i] {
			c.electors[i] = c.elect(i)
		}
	}
}

// heartbeat creates or renews this replica's member Lease.
func (c *Coordinator) heartbeat(ctx context.Context, store toolscache.Store) {
	name := memberLeaseName(c.Prefix, c.Identity)
	now := metav1.NewMicroTime(time.Now())
	spec := coordinationv1.LeaseSpec{HolderIdentity: ptr.To(c.Identity),
		LeaseDurationSeconds: ptr.To(int32(c.LeaseDuration / time.Second)), RenewTime: &now}
	leases := c.Leases.Leases(c.Namespace)
	o, exists, _ := store.GetByKey(c.Namespace + "/" + name)
	var err error
	if !exists {
		_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace,
			Labels: map[string]string{GroupLabel: c.Prefix}}, Spec: spec}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil // the informer has not shown it yet
		}
	} else {
		lease := o.(*coordinationv1.Lease).DeepCopy()
		lease.Spec = spec
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			err = nil // renewed from a stale read; the next tick reads the new one
		}
	}
	c.beating = err == nil
	if err != nil && ctx.Err() == nil {
		c.Log.Info("could not renew the member Lease", "lease", name, "error", err.Error())
	}
}

// elect runs the leader election of shard i until its context ends or the Lease is lost.
func (c *Coordinator) elect(i int) *elector {
	ectx, cancel := context.WithCancel(c.electing)
	e := &elector{cancel: cancel, done: make(chan struct{})}
	name := shardLeaseName(c.Prefix, i)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: c.Namespace, Name: name},
			Client:     c.Leases,
			LockConfig: resourcelock.ResourceLockConfig{Identity: c.Identity},
			Labels:     map[string]string{ShardLabel: c.Prefix},
		},
		LeaseDuration:   c.LeaseDuration,
		RenewDeadline:   c.RenewDeadline,
		RetryPeriod:     c.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            name,
		Callbacks:       c.callbacks(i, e),
	})
	if err != nil { // only for a bad config, which options.Parse refuses
		c.Log.Error(err, "shard leader election", "shard", i)
		cancel()
		close(e.done)
		return e
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer close(e.done)
		le.Run(ectx)
	}()
	return e
}

// callbacks are the leader election callbacks of shard i: the shard is processed from the
// start of leading to its end, or to its hand-over, whichever comes first.
func (c *Coordinator) callbacks(i int, e *elector) leaderelection.LeaderCallbacks {
	name := shardLeaseName(c.Prefix, i)
	return leaderelection.LeaderCallbacks{
		OnStartedLeading: func(lctx context.Context) {
			e.start(lctx, func() {
				c.Filter.Add(i)
				c.Log.Info("took shard", "shard", i, "lease", name)
				c.changed()
			})
		},
		OnStoppedLeading: func() {
			e.stop(func() {
				c.Filter.Remove(i)
				c.Log.Info("gave up shard", "shard", i, "lease", name)
				c.changed()
			})
		},
	}
}

// release hands shard i over: processing stops at once, the Lease goes after the grace.
// Called with c.mu held.
func (c *Coordinator) release(ctx context.Context, i int, e *elector) {
	c.releasing[i] = true
	// Stopped, not only removed: an election that wins now must not take the shard back.
	e.stop(func() { c.Filter.Remove(i) })
	c.changed()
	c.Log.Info("handing shard over", "shard", i)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		select {
		case <-time.After(c.Grace):
		case <-ctx.Done():
		}
		e.cancel()
		<-e.done
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.releasing, i)
		if c.electors[i] == e {
			delete(c.electors, i)
		}
	}()
}

// stop hands every shard over: processing stops, reconciles in flight get the grace, then
// the Leases are released and the member Lease deleted, so the others take over at once.
func (c *Coordinator) stop(stopElecting context.CancelFunc) {
	c.mu.Lock()
	for i, e := range c.electors {
		e.stop(func() { c.Filter.Remove(i) })
	}
	c.mu.Unlock()
	time.Sleep(c.Grace)
	stopElecting()
	c.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := c.Leases.Leases(c.Namespace).Delete(ctx, memberLeaseName(c.Prefix, c.Identity), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		c.Log.Info("could not delete the member Lease", "error", err.Error())
	}
}

func (c *Coordinator) changed() {
	if c.Changed != nil {
		c.Changed(c.Filter.Owned())
	}
}
