package reload

import (
	"container/list"
	"sync"
)

// compiled memoizes parsed annotation values: a value is parsed on every event and reconcile
// of every workload that carries it, and thousands of workloads often carry the same one. The
// result depends on the value and its grammar alone, so one cache serves every caller.
var compiled = newParseCache(16 << 20)

// grammar is how an annotation value is parsed.
type grammar uint8

const (
	exactNames      grammar = iota // an exclude list
	namesOrPatterns                // a reload list
	sourceKeys                     // a keys list ("name/key, ...")
)

// parsed is a parsed value, shared between workloads and never modified.
type parsed interface {
	// size estimates the bytes it holds, for the cache's budget.
	size() int
}

func parse(value string, s grammar) parsed {
	if s == sourceKeys {
		return parseKeyList(value)
	}
	return parseNames(value, s == namesOrPatterns)
}

// parseCache is a least-recently-used cache of parsed values, bounded by the bytes they hold
// (parsed.size) rather than by their number, since one value may hold compiled patterns
// hundreds of times larger than another.
type parseCache struct {
	mu      sync.Mutex
	budget  int
	used    int
	order   *list.List // of *cached, most recent first
	entries map[cacheKey]*list.Element
}

type cacheKey struct {
	value   string
	grammar grammar
}

type cached struct {
	key    cacheKey
	parsed parsed
}

func newParseCache(budget int) *parseCache {
	return &parseCache{budget: budget, order: list.New(), entries: map[cacheKey]*list.Element{}}
}

// names returns a reload list (patterns allowed) or an exclude list, parsed.
func (c *parseCache) names(value string, patterns bool) *Names {
	s := exactNames
	if patterns {
		s = namesOrPatterns
	}
	return c.get(value, s).(*Names)
}

// keyList returns a keys annotation value, parsed.
func (c *parseCache) keyList(value string) *KeyList {
	return c.get(value, sourceKeys).(*KeyList)
}

// get returns the parsed value, parsing it on a miss. Parsing runs outside the lock: two
// callers missing at once both parse, and the first to finish is kept.
func (c *parseCache) get(value string, s grammar) parsed {
	k := cacheKey{value, s}
	if p, ok := c.lookup(k); ok {
		return p
	}
	return c.add(k, parse(value, s))
}

func (c *parseCache) lookup(k cacheKey) (parsed, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok {
		c.order.MoveToFront(el)
		return el.Value.(*cached).parsed, true
	}
	return nil, false
}

func (c *parseCache) add(k cacheKey, p parsed) parsed {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok {
		c.order.MoveToFront(el)
		return el.Value.(*cached).parsed
	}
	if p.size() > c.budget {
		return p
	}
	c.entries[k] = c.order.PushFront(&cached{key: k, parsed: p})
	c.used += p.size()
	for c.used > c.budget {
		oldest := c.order.Back()
		e := oldest.Value.(*cached)
		c.order.Remove(oldest)
		delete(c.entries, e.key)
		c.used -= e.parsed.size()
	}
	return p
}

// len returns how many values are cached.
func (c *parseCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
