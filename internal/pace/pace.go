// Package pace spreads reloads over time: a token bucket across this replica, so that a
// change to a ConfigMap used by thousands of workloads rolls them at a set rate instead of
// all at once. First records of workloads reloader has not seen before take the tokens reloads
// leave, so an install on a large cluster is no write storm and never delays a reload.
package pace

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/reloader-operator/reloader/internal/shrink"
)

// Pacer hands out write slots per workload key. A workload that must wait keeps the slot it
// reserved until it is used or forgotten: the map holds at most one entry per workload, never
// one per change, and a workload reconciled again before its slot neither queues twice nor
// loses its place. A nil Pacer paces nothing.
type Pacer struct {
	reloads *rate.Limiter // nil: reloads unpaced
	burst   int
	first   *rate.Limiter // first records when reloads are unpaced; nil: unpaced

	mu    sync.Mutex
	slots map[string]slot
}

type slot struct {
	res *rate.Reservation
	at  time.Time
}

// New returns a Pacer of reloadRate reloads per second with reloadBurst at once (rate 0:
// reloads unpaced), and firstSightRate first records per second when reloads are unpaced
// (0: unpaced).
func New(reloadRate float64, reloadBurst int, firstSightRate float64) *Pacer {
	p := &Pacer{slots: map[string]slot{}, burst: max(reloadBurst, 1)}
	if reloadRate > 0 {
		p.reloads = rate.NewLimiter(rate.Limit(reloadRate), p.burst)
	} else if firstSightRate > 0 {
		p.first = rate.NewLimiter(rate.Limit(firstSightRate), max(int(math.Ceil(firstSightRate)), 1))
	}
	return p
}

// early lets a slot be used a little before its time: a requeue is not to the nanosecond.
const early = 10 * time.Millisecond

// Reload returns how long the workload key must wait before it reloads; 0 means now, and
// the slot is spent.
func (p *Pacer) Reload(key string, now time.Time) time.Duration {
	if p == nil || p.reloads == nil {
		return 0
	}
	return p.take(p.reloads, key, now)
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
	if p.reloads.TokensAt(now) > float64(p.burst)/2 {
		r := p.reloads.ReserveN(now, 1)
		if r.OK() && r.DelayFrom(now) == 0 {
			return 0
		}
		r.CancelAt(now)
	}
	refill := time.Duration(float64(p.burst) / 2 / float64(p.reloads.Limit()) * float64(time.Second))
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

// Forget gives back the slot key reserved and did not use: its workload no longer needs to
// reload, or is gone.
func (p *Pacer) Forget(key string, now time.Time) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range []string{key, "first/" + key} {
		if s, ok := p.slots[k]; ok {
			s.res.CancelAt(now)
			shrink.Delete(&p.slots, k)
		}
	}
}

// String describes the reload rate, as Events and explain say it.
func (p *Pacer) String() string {
	if p == nil || p.reloads == nil {
		return "no rate limit"
	}
	return fmt.Sprintf("rate limit %g reloads/s, burst %d (--reload-rate, --reload-burst)", float64(p.reloads.Limit()), p.burst)
}

// Until returns when key's reserved slot comes, if it holds one.
func (p *Pacer) Until(key string) (time.Time, bool) {
	if p == nil {
		return time.Time{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.slots[key]
	return s.at, ok
}

// Len is the number of slots reserved and not yet used.
func (p *Pacer) Len() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.slots)
}
