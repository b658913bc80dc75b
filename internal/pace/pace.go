// Package pace spreads reloads over time: a token bucket across this replica, so that a
// change to a ConfigMap used by thousands of workloads rolls them at a set rate instead of
// all at once. Tokens go to the namespaces with reloads waiting in turn, so that a namespace
// rolling thousands of workloads delays another's reload by one turn, not by its backlog.
// First records of workloads reloader has not seen before take the tokens reloads
// leave, so an install on a large cluster is no write storm and never delays a reload.
package pace

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/reloader-operator/reloader/internal/cachemem/shrink"
	"github.com/reloader-operator/reloader/internal/fair"
)

// Pacer hands out write slots per workload key. A workload that must wait keeps the slot it
// reserved until it is used or forgotten: the map holds at most one entry per workload, never
// one per change, and a workload reconciled again before its slot neither queues twice nor
// loses its place. A nil Pacer paces nothing.
type Pacer struct {
	reloads *rate.Limiter // nil: reloads unpaced
	first   *rate.Limiter // first records when reloads are unpaced; nil: unpaced
	// The rates and burst as configured, for the whole install; Share takes this replica's.
	reloadRate, firstRate float64
	reloadBurst           int

	mu    sync.Mutex
	burst int             // the reload burst of this replica's share
	slots map[string]slot // first records' slots, when reloads are unpaced
	// waiting holds the reloads waiting for a token, a lane per namespace; granted, the
	// tokens handed to them, until they come back for them or are forgotten.
	waiting *fair.RoundRobin[string]
	granted map[string]slot
}

type slot struct {
	res *rate.Reservation
	at  time.Time
}

// New returns a Pacer of reloadRate reloads per second with reloadBurst at once (rate 0:
// reloads unpaced), and firstSightRate first records per second when reloads are unpaced
// (0: unpaced), one at a time.
func New(reloadRate float64, reloadBurst int, firstSightRate float64) *Pacer {
	p := &Pacer{slots: map[string]slot{}, burst: max(reloadBurst, 1),
		waiting: fair.NewRoundRobin[string](), granted: map[string]slot{},
		reloadRate: reloadRate, firstRate: firstSightRate, reloadBurst: max(reloadBurst, 1)}
	if reloadRate > 0 {
		p.reloads = rate.NewLimiter(rate.Limit(reloadRate), p.burst)
	} else if firstSightRate > 0 {
		// A burst of one: the rate caps first records in any one second, as a write budget
		// says, where a burst of a second's worth would double the first second.
		p.first = rate.NewLimiter(rate.Limit(firstSightRate), 1)
	}
	return p
}

// Share makes this replica's rates its share of the install's, by the shards it owns: with
// --shards, --reload-rate, --reload-burst and --first-sight-rate are for the whole install,
// and a replica owning owned of total shards takes rate × owned / total (not rounded), and a
// burst of ⌈burst × owned / total⌉. A replica owning no shard keeps one shard's share (it
// reloads nothing meanwhile; its first shard then starts at once), and the burst is at
// least 1. The shares of the replicas add up to the install's rate whenever the shards are
// all owned; while one moves, its share is briefly counted by neither or, released late,
// by both. Tokens already handed out are kept.
func (p *Pacer) Share(owned, total int) {
	if p == nil || total <= 0 {
		return
	}
	frac := float64(max(owned, 1)) / float64(total)
	frac = min(frac, 1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reloads != nil {
		p.burst = max(int(math.Ceil(float64(p.reloadBurst)*frac-1e-9)), 1)
		p.reloads.SetLimit(rate.Limit(p.reloadRate * frac))
		p.reloads.SetBurst(p.burst)
	}
	if p.first != nil {
		r := p.firstRate * frac
		p.first.SetLimit(rate.Limit(r))
	}
}

// early lets a slot be used a little before its time: a requeue is not to the nanosecond.
const early = 10 * time.Millisecond

// Reload returns how long the reload of workload key, in namespace ns, must wait; 0 means
// now, and the token is spent. A reload that must wait joins its namespace's lane and gets a
// token in its namespace's turn; until then the wait returned is an estimate of that turn.
// Asking again before the token comes keeps the place.
func (p *Pacer) Reload(key, ns string, now time.Time) time.Duration {
	if p == nil || p.reloads == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.granted[key]; !ok && !p.waiting.Has(key) {
		if p.waiting.Len() == 0 && p.reloads.AllowN(now, 1) {
			return 0
		}
		p.waiting.Push(ns, key)
	}
	p.grant(now)
	if g, ok := p.granted[key]; ok {
		if wait := g.at.Sub(now); wait > early {
			return wait
		}
		shrink.Delete(&p.granted, key)
		return 0
	}
	return p.eta(key, now)
}

// grant hands the tokens that come within the horizon to the waiting reloads, one namespace
// at a time. Handing them out a little ahead (their time is kept in the limiter) loses none
// to the bucket's cap between two calls; handing them out no further ahead lets a namespace
// that starts waiting take its turn soon.
func (p *Pacer) grant(now time.Time) {
	ahead := max(horizon.Seconds()*float64(p.reloads.Limit()), 1)
	for p.waiting.Len() > 0 && 1-p.reloads.TokensAt(now) <= ahead {
		key, _ := p.waiting.Pop()
		r := p.reloads.ReserveN(now, 1)
		p.granted[key] = slot{res: r, at: now.Add(r.DelayFrom(now))}
	}
}

// horizon is how far ahead tokens are handed out (at least one token).
const horizon = 100 * time.Millisecond

// eta estimates when key's token comes: after the tokens already handed out, one for each
// reload whose turn comes before it.
func (p *Pacer) eta(key string, now time.Time) time.Duration {
	perToken := float64(time.Second) / float64(p.reloads.Limit())
	next := (1 - p.reloads.TokensAt(now)) * perToken
	return time.Duration(next + float64(p.waiting.Ahead(key))*perToken)
}

// FirstSight returns how long the first record of workload key must wait; 0 means now. With
// reloads paced it takes a token only while more than half the burst is free, and otherwise
// retries after about the time half the burst takes to refill, with jitter so that a crowd
// of new workloads does not come back at once.
func (p *Pacer) FirstSight(key string, now time.Time) time.Duration {
	if p == nil {
		return 0
	}
	if p.reloads == nil {
		if p.first == nil {
			return 0
		}
		return p.take(p.first, "first/"+key, now)
	}
	p.mu.Lock()
	p.grant(now) // waiting reloads first
	burst := p.burst
	p.mu.Unlock()
	if p.reloads.TokensAt(now) > float64(burst)/2 {
		r := p.reloads.ReserveN(now, 1)
		if r.OK() && r.DelayFrom(now) == 0 {
			return 0
		}
		r.CancelAt(now)
	}
	refill := time.Duration(float64(burst) / 2 / float64(p.reloads.Limit()) * float64(time.Second))
	refill = max(refill, 10*time.Millisecond)
	return refill + rand.N(refill)
}

// take spends key's reserved slot when it has come, or reserves one.
func (p *Pacer) take(l *rate.Limiter, key string, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.slots[key]; ok {
		if wait := s.at.Sub(now); wait > early {
			return wait
		}
		shrink.Delete(&p.slots, key)
		return 0
	}
	r := l.ReserveN(now, 1)
	if !r.OK() {
		return 0
	}
	wait := r.DelayFrom(now)
	if wait <= 0 {
		return 0
	}
	p.slots[key] = slot{res: r, at: now.Add(wait)}
	return wait
}

// Forget gives back the token key holds and did not use, or its place in the line, or its
// first record's slot: its workload no longer needs them, or is gone.
func (p *Pacer) Forget(key string, now time.Time) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waiting.Remove(key)
	release(&p.granted, key, now)
	release(&p.slots, "first/"+key, now)
}

// release cancels the reservation m holds under key, giving its token back, and drops it.
func release(m *map[string]slot, key string, now time.Time) {
	if s, ok := (*m)[key]; ok {
		s.res.CancelAt(now)
		shrink.Delete(m, key)
	}
}

// String describes the reload rate, as Events and explain say it.
func (p *Pacer) String() string {
	if p == nil || p.reloads == nil {
		return "no rate limit"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reloads.Limit() != rate.Limit(p.reloadRate) {
		return fmt.Sprintf("rate limit %g reloads/s, burst %d (this replica's share of --reload-rate %g, --reload-burst %d by the shards it owns)",
			float64(p.reloads.Limit()), p.burst, p.reloadRate, p.reloadBurst)
	}
	return fmt.Sprintf("rate limit %g reloads/s, burst %d (--reload-rate, --reload-burst)", float64(p.reloads.Limit()), p.burst)
}

// Until returns when key's reload is expected to go, if it waits for a token.
func (p *Pacer) Until(key string, now time.Time) (time.Time, bool) {
	if p == nil || p.reloads == nil {
		return time.Time{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if g, ok := p.granted[key]; ok {
		return g.at, true
	}
	if !p.waiting.Has(key) {
		return time.Time{}, false
	}
	return now.Add(p.eta(key, now)), true
}

// Len is the number of workloads holding a slot or a token, or waiting for one.
func (p *Pacer) Len() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.slots) + p.waiting.Len() + len(p.granted)
}
