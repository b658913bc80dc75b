package reload

import (
	"container/list"
	"sync"
)

// compiled memoizes parsed name lists by annotation value: a value is parsed on every event
// and reconcile of every workload that carries it, and thousands of workloads often carry
// the same one. The result depends on the value alone, so one cache serves every caller.
var compiled = newNamesCache(16 << 20)

// namesCache is a least-recently-used cache of parsed values, bounded by the bytes they hold
// (Names.cost) rather than by their number, since one value may hold compiled patterns
// hundreds of times larger than another.
type namesCache struct {
	mu      sync.Mutex
	budget  int
	used    int
	order   *list.List // of *cached, most recent first
	entries map[cacheKey]*list.Element
}

type cacheKey struct {
	value    string
	patterns bool
}

type cached struct {
	key   cacheKey
	names *Names
}

func newNamesCache(budget int) *namesCache {
	return &namesCache{budget: budget, order: list.New(), entries: map[cacheKey]*list.Element{}}
}

// get returns the parsed value, parsing it on a miss. Parsing runs outside the lock: two
// callers missing at once both parse, and the first to finish is kept.
func (c *namesCache) get(value string, patterns bool) *Names {
	k := cacheKey{value, patterns}
	if n, ok := c.lookup(k); ok {
		return n
	}
	return c.add(k, parseNames(value, patterns))
}

func (c *namesCache) lookup(k cacheKey) (*Names, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok {
		c.order.MoveToFront(el)
		return el.Value.(*cached).names, true
	}
	return nil, false
}

func (c *namesCache) add(k cacheKey, n *Names) *Names {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok {
		c.order.MoveToFront(el)
		return el.Value.(*cached).names
	}
	if n.cost > c.budget {
		return n
	}
	c.entries[k] = c.order.PushFront(&cached{key: k, names: n})
	c.used += n.cost
	for c.used > c.budget {
		oldest := c.order.Back()
		e := oldest.Value.(*cached)
		c.order.Remove(oldest)
		delete(c.entries, e.key)
		c.used -= e.names.cost
	}
	return n
}

// len returns how many values are cached.
func (c *namesCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
