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
	"k8s.io/utils/ptr"
)

// ShardLabel marks the Lease of each shard with the prefix of its install.
const ShardLabel = "reloader.dev/shard-of"

// Coordinator takes and gives up shards through Leases. Each replica renews a member Lease;
// the live members divide the shards among them (Assign); each shard assigned is held through
// its own Lease, so at most one replica holds it:
//
//   - a shard Lease is taken when it has no holder (released), or when its holder has gone:
//     the Lease expired by liveness (its renewTime plus its duration passed, and no renewal
//     seen for as long). The update carries the resourceVersion read, so of two replicas that
//     try at once one wins and the other gets a conflict;
//   - the holder renews each of its shard Leases with its member Lease every retry period,
//     and stops processing a shard whose Lease it could not renew for the renew deadline
//     (shorter than the lease duration, so it has stopped before anyone may take it), or
//     that a conflict shows held by another;
//   - a shard assigned elsewhere (a replica joined) is first left unprocessed, then after the
//     grace its Lease released, so the next owner starts only after this one stopped;
//   - on shutdown every shard is left unprocessed and the member Lease deleted at once (the
//     others assign the shards among themselves meanwhile), then after the grace the shard
//     Leases are released.
//
// The member and shard Leases are watched, and the Coordinator acts on each change and at
// the moment a Lease is due to expire, not at its next retry period: a dead replica's shards
// are taken within milliseconds of its Leases' expiry, a released one within milliseconds of
// its release.
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
	// Changed, when set, hears the owned shards after each change (metrics, the pacer's share).
	Changed func(owned []int)

	live   *liveness
	wake   chan struct{}
	shards toolscache.Store

	mu   sync.Mutex
	held map[int]*held
	wg   sync.WaitGroup
	// beating is whether this replica's last heartbeat went through: a replica that cannot
	// renew its own Lease does not judge others dead.
	beating  bool
	lastBeat time.Time
}

// held is a shard whose Lease this replica holds.
type held struct {
	lease *coordinationv1.Lease // as last written
	// renewed is the renewTime last written successfully.
	renewed time.Time
	// releasing: left unprocessed, its Lease released after the grace.
	releasing bool
}

// NeedLeaderElection is false: every replica takes its share.
func (c *Coordinator) NeedLeaderElection() bool { return false }

// Start runs until ctx ends, then hands every shard over and deletes its member Lease.
func (c *Coordinator) Start(ctx context.Context) error {
	c.held, c.wake = map[int]*held{}, make(chan struct{}, 1)
	c.live = newLiveness(c.LeaseDuration)
	members := c.leaseInformer(GroupLabel + "=" + c.Prefix)
	// Every Lease of the namespace, not only those labelled ShardLabel: a shard's Lease
	// written by an earlier version (client-go's leader election) carries no label, and its
	// holder's expiry must be seen to take it over in a rolling upgrade. Shard Leases are
	// found by name; reloader's namespace holds a handful of Leases.
	shards := c.leaseInformer("")
	c.shards = shards.GetStore()
	namespaces := c.namespaceInformer()
	go members.Run(ctx.Done())
	go shards.Run(ctx.Done())
	go namespaces.Run(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), members.HasSynced, shards.HasSynced, namespaces.HasSynced) {
		return ctx.Err()
	}
	c.Log.Info("sharding by namespace", "shards", c.Space.Shards(), "identity", c.Identity,
		"leaseNamespace", c.Namespace, "memberLease", memberLeaseName(c.Prefix, c.Identity))
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			c.stop()
			return nil
		case <-timer.C:
		case <-c.wake:
		}
		next := c.tick(ctx, members.GetStore(), time.Now())
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(time.Until(next))
	}
}

// poke makes the loop look again at once.
func (c *Coordinator) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// leaseInformer watches the Leases of this install with the given label: one watch, no
// periodic lists. Each change is noted for liveness, when it arrives, and looked at at once.
func (c *Coordinator) leaseInformer(selector string) toolscache.SharedIndexInformer {
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
	inf := toolscache.NewSharedIndexInformer(lw, &coordinationv1.Lease{}, 0, toolscache.Indexers{})
	saw := func(o any) {
		if l, ok := o.(*coordinationv1.Lease); ok {
			c.live.saw(l, time.Now())
		}
		c.poke()
	}
	_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    saw,
		UpdateFunc: func(_, o any) { saw(o) },
		DeleteFunc: func(o any) {
			if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if l, ok := o.(*coordinationv1.Lease); ok {
				c.live.forget(l.Name)
			}
			c.poke()
		},
	})
	return inf
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

// tick renews this replica's membership and its shards when due, and brings the shards held in
// line with the assignment of the members alive now. It returns when to look again.
func (c *Coordinator) tick(ctx context.Context, members toolscache.Store, now time.Time) time.Time {
	next := now.Add(c.RetryPeriod)
	if due := c.lastBeat.Add(c.RetryPeriod); !now.Before(due) || !c.beating {
		c.lastBeat = now
		c.heartbeat(ctx, members, now)
		c.renew(ctx)
		now = time.Now() // the writes may have taken a while
	} else {
		next = due
	}
	var leases []*coordinationv1.Lease
	for _, o := range members.List() {
		leases = append(leases, o.(*coordinationv1.Lease))
	}
	alive, stale, expiry := c.live.members(leases, now)
	if !expiry.IsZero() && expiry.Before(next) {
		next = expiry
	}
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
	for i, h := range c.held {
		switch {
		case h.releasing:
		case now.Sub(h.renewed) > c.RenewDeadline:
			// Not renewed for the renew deadline: another may take it at the lease duration.
			c.drop(i, "could not renew its Lease for the renew deadline")
		case !mine[i]:
			c.release(ctx, i, h)
		}
	}
	var take []int
	for i := range mine {
		if _, ok := c.held[i]; !ok {
			take = append(take, i)
		}
	}
	c.mu.Unlock()

	type candidate struct {
		i     int
		lease *coordinationv1.Lease // nil: none yet
	}
	var acquire []candidate
	for _, i := range take {
		o, exists, _ := c.shards.GetByKey(c.Namespace + "/" + shardLeaseName(c.Prefix, i))
		if !exists {
			acquire = append(acquire, candidate{i: i})
			continue
		}
		lease := o.(*coordinationv1.Lease)
		if who := holder(lease); who != "" && who != c.Identity {
			if at := c.live.expiry(lease, now); at.After(now) {
				if at.Before(next) {
					next = at // the holder's Lease expires then, unless it renews
				}
				continue
			}
			if !c.beating {
				continue // cut off ourselves: the holder may be alive
			}
		}
		acquire = append(acquire, candidate{i: i, lease: lease})
	}
	parallel(len(acquire), func(k int) { c.acquire(ctx, acquire[k].i, acquire[k].lease) })
	return next.Add(10 * time.Millisecond) // just past an expiry, not just before
}

// parallel runs f(0..n-1), at most 16 at once, and waits for them.
func parallel(n int, f func(k int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for k := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			f(k)
		}()
	}
	wg.Wait()
}

// spec is the spec of a shard or member Lease held by this replica, renewed at now.
func (c *Coordinator) spec(now time.Time) coordinationv1.LeaseSpec {
	t := metav1.NewMicroTime(now)
	return coordinationv1.LeaseSpec{HolderIdentity: ptr.To(c.Identity),
		LeaseDurationSeconds: ptr.To(int32(c.LeaseDuration / time.Second)), RenewTime: &t}
}

// acquire takes shard i's Lease as read (nil: none yet), guarded by its resourceVersion.
func (c *Coordinator) acquire(ctx context.Context, i int, read *coordinationv1.Lease) {
	name := shardLeaseName(c.Prefix, i)
	now := time.Now()
	leases := c.Leases.Leases(c.Namespace)
	var got *coordinationv1.Lease
	var err error
	from := ""
	if read == nil {
		spec := c.spec(now)
		spec.AcquireTime, spec.LeaseTransitions = spec.RenewTime, ptr.To(int32(0))
		got, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace,
			Labels: map[string]string{ShardLabel: c.Prefix}}, Spec: spec}, metav1.CreateOptions{})
	} else {
		lease := read.DeepCopy()
		from = holder(lease)
		spec := c.spec(now)
		spec.AcquireTime, spec.LeaseTransitions = spec.RenewTime, lease.Spec.LeaseTransitions
		if from != c.Identity {
			spec.LeaseTransitions = ptr.To(ptr.Deref(lease.Spec.LeaseTransitions, 0) + 1)
		}
		lease.Spec = spec
		if lease.Labels == nil {
			lease.Labels = map[string]string{}
		}
		lease.Labels[ShardLabel] = c.Prefix
		got, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	}
	if err != nil {
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) && ctx.Err() == nil {
			c.Log.Info("could not take a shard's Lease", "shard", i, "lease", name, "error", err.Error())
		}
		return // another took it first, or the cache was behind: looked at again on the next change
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.held[i]; ok || ctx.Err() != nil {
		return
	}
	c.held[i] = &held{lease: got, renewed: now}
	c.Filter.Add(i)
	if from != "" && from != c.Identity {
		c.Log.Info("took shard", "shard", i, "lease", name, "from", from, "reason", "its holder's Lease expired")
	} else {
		c.Log.Info("took shard", "shard", i, "lease", name)
	}
	c.changed()
}

// renew renews the Leases of the shards held, at once.
func (c *Coordinator) renew(ctx context.Context) {
	c.mu.Lock()
	var is []int
	var ls []*coordinationv1.Lease
	for i, h := range c.held {
		if !h.releasing {
			is, ls = append(is, i), append(ls, h.lease)
		}
	}
	c.mu.Unlock()
	parallel(len(is), func(k int) { c.renewOne(ctx, is[k], ls[k]) })
}

func (c *Coordinator) renewOne(ctx context.Context, i int, lease *coordinationv1.Lease) {
	leases := c.Leases.Leases(c.Namespace)
	now := time.Now()
	next := lease.DeepCopy()
	next.Spec.HolderIdentity, next.Spec.RenewTime = ptr.To(c.Identity), ptr.To(metav1.NewMicroTime(now))
	next.Spec.LeaseDurationSeconds = ptr.To(int32(c.LeaseDuration / time.Second))
	got, err := leases.Update(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		// Written since (our own write unseen, or another's): taken by another, or renewed
		// from the Lease as it is now.
		cur, gerr := leases.Get(ctx, lease.Name, metav1.GetOptions{})
		switch {
		case gerr != nil:
			err = gerr
		case holder(cur) != c.Identity:
			c.mu.Lock()
			if h, ok := c.held[i]; ok && !h.releasing {
				c.drop(i, "its Lease is held by "+holder(cur))
			}
			c.mu.Unlock()
			return
		default:
			cur.Spec = next.Spec
			got, err = leases.Update(ctx, cur, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		if ctx.Err() == nil {
			c.Log.Info("could not renew a shard's Lease", "shard", i, "lease", lease.Name, "error", err.Error())
		}
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.held[i]; ok && !h.releasing {
		h.lease, h.renewed = got, now
	}
}

// drop stops processing shard i at once, its Lease lost or about to be. Called with c.mu held.
func (c *Coordinator) drop(i int, why string) {
	delete(c.held, i)
	c.Filter.Remove(i)
	c.Log.Info("gave up shard", "shard", i, "lease", shardLeaseName(c.Prefix, i), "reason", why)
	c.changed()
}

// heartbeat creates or renews this replica's member Lease.
func (c *Coordinator) heartbeat(ctx context.Context, store toolscache.Store, now time.Time) {
	name := memberLeaseName(c.Prefix, c.Identity)
	spec := c.spec(now)
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

// release hands shard i over: processing stops at once, the Lease is released after the
// grace. Called with c.mu held.
func (c *Coordinator) release(ctx context.Context, i int, h *held) {
	h.releasing = true
	c.Filter.Remove(i)
	c.changed()
	c.Log.Info("handing shard over", "shard", i)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		select {
		case <-time.After(c.Grace):
		case <-ctx.Done():
			return // stop releases it
		}
		c.releaseLease(ctx, h.lease)
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.held[i] == h {
			delete(c.held, i)
		}
		c.poke()
	}()
}

// releaseLease empties the holder of a shard Lease held, as client-go's leader election
// does on release: the next holder takes it at once.
func (c *Coordinator) releaseLease(ctx context.Context, lease *coordinationv1.Lease) {
	leases := c.Leases.Leases(c.Namespace)
	now := metav1.NewMicroTime(time.Now())
	next := lease.DeepCopy()
	next.Spec.HolderIdentity, next.Spec.LeaseDurationSeconds = ptr.To(""), ptr.To(int32(1))
	next.Spec.RenewTime, next.Spec.AcquireTime = &now, &now
	_, err := leases.Update(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		cur, gerr := leases.Get(ctx, lease.Name, metav1.GetOptions{})
		if gerr != nil || holder(cur) != c.Identity {
			return // taken meanwhile, or gone
		}
		cur.Spec = next.Spec
		_, err = leases.Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		c.Log.Info("could not release a shard's Lease", "lease", lease.Name, "error", err.Error())
	}
}

// stop hands every shard over: processing stops and the member Lease goes at once (the others
// assign the shards among themselves meanwhile), reconciles in flight get the grace, then the
// shard Leases are released, so the others take over at once.
func (c *Coordinator) stop() {
	c.mu.Lock()
	for i, h := range c.held {
		if !h.releasing {
			h.releasing = true
			c.Filter.Remove(i)
		}
	}
	c.changed()
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := c.Leases.Leases(c.Namespace).Delete(ctx, memberLeaseName(c.Prefix, c.Identity), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		c.Log.Info("could not delete the member Lease", "error", err.Error())
	}
	time.Sleep(c.Grace)
	c.wg.Wait() // hand-overs under way
	c.mu.Lock()
	var ls []*coordinationv1.Lease
	for _, h := range c.held {
		ls = append(ls, h.lease)
	}
	c.held = map[int]*held{}
	c.mu.Unlock()
	parallel(len(ls), func(k int) { c.releaseLease(ctx, ls[k]) })
	c.Log.Info("released every shard", "shards", len(ls))
}

func (c *Coordinator) changed() {
	if c.Changed != nil {
		c.Changed(c.Filter.Owned())
	}
}
