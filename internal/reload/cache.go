package reload

import (
	"container/list"
	"sync"
	"time"
)

// Caches are one manager's memos of what its decisions parse: annotation values, parsed
// (rules), and the time zones of reload windows (zones). A value is parsed on every event and
// reconcile of every workload that carries it, and thousands of workloads often carry the
// same one; the result depends on the value and its grammar alone, so one cache serves every
// reconciler of a manager. internal/app makes one per manager and hands it to its reconcilers
// through Policy; nothing is shared between managers. A nil *Caches memoizes nothing: every
// call parses (tests, one-off commands).
type Caches struct {
	rules *parseCache
	// zones holds the time zones loaded: only valid IANA names enter, so it stays small.
	zones sync.Map
}

// RulesBudget bounds the bytes of parsed values one Caches keeps (parsed.size).
const RulesBudget = 16 << 20

// NewCaches returns empty caches, bounded as their fields say.
func NewCaches() *Caches { return &Caches{rules: newParseCache(RulesBudget)} }

// names is parseCache.names, memoized when c is not nil.
func (c *Caches) names(value string, patterns bool) *Names {
	if c == nil {
		return parseNames(value, patterns)
	}
	return c.rules.names(value, patterns)
}

// keyList is parseCache.keyList, memoized when c is not nil.
func (c *Caches) keyList(value string) *KeyList {
	if c == nil {
		return parseKeyList(value)
	}
	return c.rules.keyList(value)
}

// location is time.LoadLocation, memoized when c is not nil.
func (c *Caches) location(name string) (*time.Location, error) {
	if c != nil {
		if l, ok := c.zones.Load(name); ok {
			return l.(*time.Location), nil
		}
	}
	l, err := loadLocation(name)
	if err == nil && c != nil {
		c.zones.Store(name, l)
	}
	return l, err
}

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
