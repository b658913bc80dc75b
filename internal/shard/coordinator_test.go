package shard_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/reloader-operator/reloader/internal/shard"
)

const testLease = 4 * time.Second

func leaseNamespace(t *testing.T, ctx context.Context) string {
	t.Helper()
	ns := fmt.Sprintf("coord-%04d", rand.IntN(10000))
	if _, err := clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = clientset.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	return ns
}

// coordinator starts a Coordinator of n shards as identity until its context ends.
func coordinator(t *testing.T, ctx context.Context, ns, prefix, identity string, n int) (*shard.Coordinator, context.CancelFunc, <-chan struct{}) {
	t.Helper()
	space, _ := shard.NewSpace(n)
	c := &shard.Coordinator{Leases: clientset.CoordinationV1(), Namespaces: clientset.CoreV1(), Namespace: ns, Prefix: prefix,
		Identity: identity, Space: space, Filter: shard.NewFilter(space, true), LeaseDuration: testLease,
		RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond, Grace: 200 * time.Millisecond, Log: testr.New(t)}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.Start(cctx); err != nil && cctx.Err() == nil {
			t.Errorf("%s: %v", identity, err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return c, cancel, done
}

func shardLeases(t *testing.T, ctx context.Context, ns, prefix string) map[string]coordinationv1.Lease {
	t.Helper()
	list, err := clientset.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{LabelSelector: shard.ShardLabel + "=" + prefix})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]coordinationv1.Lease{}
	for _, l := range list.Items {
		out[l.Name] = l
	}
	return out
}

func holderOf(l coordinationv1.Lease) string { return ptr.Deref(l.Spec.HolderIdentity, "") }

// A replica gone without a word (SIGKILL) holds a member Lease and shard Leases it no longer
// renews: the survivor takes its shards once the Leases expire, by the renewTime written in
// them, never before, and not a second lease duration later (client-go's leader election
// waited a full lease from the moment it first looked, which was after the member's death).
func TestDeadHoldersShardsTakenAtTheirExpiry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := leaseNamespace(t, ctx)
	const prefix, n, ghost = "dead", 4, "ghost"
	leases := clientset.CoordinationV1().Leases(ns)
	names := []string{prefix + "-member-ghost"}
	labels := []map[string]string{{shard.GroupLabel: prefix}}
	for i := range n {
		names, labels = append(names, fmt.Sprintf("%s-%d", prefix, i)), append(labels, map[string]string{shard.ShardLabel: prefix})
	}
	// The ghost holds every shard and renews for two seconds with the survivor watching.
	renew := func() time.Time {
		now := time.Now()
		for k, name := range names {
			spec := coordinationv1.LeaseSpec{HolderIdentity: ptr.To(ghost), LeaseDurationSeconds: ptr.To(int32(testLease / time.Second)),
				RenewTime: ptr.To(metav1.NewMicroTime(now))}
			l, err := leases.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels[k]}, Spec: spec}, metav1.CreateOptions{})
			} else {
				l.Spec = spec
				_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		return now
	}
	last := renew()
	c, _, _ := coordinator(t, ctx, ns, prefix, "survivor", n)
	for range 4 {
		time.Sleep(500 * time.Millisecond)
		last = renew()
	}
	for time.Since(last) < testLease-500*time.Millisecond {
		if owned := c.Filter.Owned(); len(owned) > 0 {
			t.Fatalf("took %v %v after the ghost's last renewal, before its Leases expired", owned, time.Since(last))
		}
		time.Sleep(50 * time.Millisecond)
	}
	for len(c.Filter.Owned()) < n {
		if ctx.Err() != nil {
			t.Fatalf("owns %v", c.Filter.Owned())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for name, l := range shardLeases(t, ctx, ns, prefix) {
		took := l.Spec.AcquireTime.Sub(last)
		t.Logf("%s taken %v after the ghost's last renewal (lease %v)", name, took.Round(time.Millisecond), testLease)
		if holderOf(l) != "survivor" || took < testLease {
			t.Errorf("%s: held by %q, taken %v after the last renewal, want survivor at %v or later", name, holderOf(l), took, testLease)
		}
		// Loose on a busy machine, but well short of two lease durations.
		if took > testLease+3*time.Second {
			t.Errorf("%s taken %v after the last renewal: more than the lease duration + 3s", name, took)
		}
	}
}

// Two replicas share the shards; one stopped gracefully hands its shards to the other within
// the grace and a few round trips, never holding one at the same time.
func TestGracefulStopHandsOverAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := leaseNamespace(t, ctx)
	const prefix, n = "graceful", 6
	a, stopA, doneA := coordinator(t, ctx, ns, prefix, "a", n)
	b, _, _ := coordinator(t, ctx, ns, prefix, "b", n)
	for {
		h := shardLeases(t, ctx, ns, prefix)
		count := map[string]int{}
		for _, l := range h {
			count[holderOf(l)]++
		}
		if count["a"] == n/2 && count["b"] == n/2 && len(a.Filter.Owned()) == n/2 && len(b.Filter.Owned()) == n/2 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("never shared: %v", count)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopped := time.Now()
	stopA()
	for len(b.Filter.Owned()) < n {
		if ctx.Err() != nil {
			t.Fatalf("b owns %v", b.Filter.Owned())
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(stopped)
	t.Logf("b owns every shard %v after a was stopped (grace 200ms)", took.Round(time.Millisecond))
	<-doneA
	if owned := a.Filter.Owned(); len(owned) != 0 {
		t.Errorf("a still owns %v", owned)
	}
	if took > 5*time.Second { // ~0.3s alone; loose for a busy machine
		t.Errorf("hand-over took %v", took)
	}
}
