package reload

import (
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// hostileValue is a reload annotation value of about 200 KB of long pattern entries, each
// as costly to compile as the regexp package allows.
func hostileValue() string {
	entry := strings.Repeat("(?:[a-z0-9]{999}x)", 12)
	var entries []string
	for n := 0; n < 200<<10; n += len(entry) + 1 {
		entries = append(entries, entry)
	}
	return strings.Join(entries, ",")
}

// worstWithinLimits fills the value and pattern limits with patterns costly to compile.
func worstWithinLimits() string {
	var entries []string
	n := 0
	for i := 0; n < MaxValueBytes-64 && len(entries) < MaxEntries; i++ {
		e := "[a-z0-9\\-_.~]{15}" + strings.Repeat("[A-Z]", i%7) + "q"
		entries = append(entries, e)
		n += len(e) + 1
	}
	return strings.Join(entries, ",")
}

// allocated returns the bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestHostileAnnotationCostsLittle(t *testing.T) {
	for name, v := range map[string]string{"200 KB of long patterns": hostileValue(), "worst within the limits": worstWithinLimits()} {
		t.Run(name, func(t *testing.T) {
			var n *Names
			bytes := allocated(func() { n = parseNames(v, true) })
			t.Logf("%d-byte value: %d bytes allocated, %d patterns kept, errors: %v", len(v), bytes, n.Patterns(), n.errs)
			if bytes > 1<<20 {
				t.Errorf("parsing allocated %d bytes, want under 1 MiB", bytes)
			}
			if held := testutil.RetainedBy(func() any { return parseNames(v, true) }); uint64(n.cost) < held/2 {
				t.Errorf("cache cost %d underestimates the %d bytes a parse holds", n.cost, held)
			}
		})
	}
	n := parseNames(hostileValue(), true)
	if !n.Empty() || len(n.errs) != 1 || !strings.Contains(n.errs[0].Error(), "whole annotation is ignored") {
		t.Errorf("over-size value: kept %d, errors %v; want nothing kept and one error", n.Patterns(), n.errs)
	}
}

func TestLimits(t *testing.T) {
	long := strings.Repeat("a", 254)
	tests := []struct {
		name         string
		value        string
		patterns     bool
		wantLiterals []string
		wantPatterns int
		wantErr      string
	}{
		{"names and patterns", "app.config, b ,feature-.*,,", true, []string{"app.config", "b"}, 1, ""},
		{"a name of 253 characters is a name", strings.Repeat("a", 253), true, []string{strings.Repeat("a", 253)}, 0, ""},
		{"254 characters are no name, and too long a pattern", long + "-.*", true, nil, 0, "over the limit of 256 for a pattern"},
		{"too many entries", strings.Repeat("a,", MaxEntries) + "b", true, nil, 0, "257 entries, over the limit of 256"},
		{"as many entries as allowed", strings.Repeat("a,", MaxEntries-1) + "b", true, []string{"a", "b"}, 0, ""},
		{"counted repetition past the budget", "a{1000}b{1000}c{1000},ok-.*", true, nil, 1, "too complex"},
		{"nested repetition past the budget", "(?:(?:[a-z0-9]{30}){30}),ok", true, []string{"ok"}, 0, "too complex"},
		{"invalid pattern", "bad-[,ok", true, []string{"ok"}, 0, "not a valid regular expression"},
		{"exclude lists hold names only", "a.b,c-.*", false, []string{"a.b"}, 0, "not an object name"},
		{"too many patterns", strings.Repeat("p-.*,", MaxPatterns+5), true, nil, MaxPatterns, "5 more patterns ignored: a value holds at most 32 patterns"},
		{"errors are few", "x-[,y-[,z-[,w-[,v-[", true, nil, 0, "and 2 more patterns rejected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := parseNames(tt.value, tt.patterns)
			if !slices.Equal(n.Literals(), tt.wantLiterals) || n.Patterns() != tt.wantPatterns {
				t.Errorf("kept %v and %d patterns, want %v and %d", n.Literals(), n.Patterns(), tt.wantLiterals, tt.wantPatterns)
			}
			var msgs []string
			for _, err := range n.errs {
				msgs = append(msgs, err.Error())
			}
			msg := strings.Join(msgs, "; ")
			if (tt.wantErr == "") != (msg == "") || !strings.Contains(msg, tt.wantErr) {
				t.Errorf("errors %q, want one containing %q", msg, tt.wantErr)
			}
			if len(msg) > 1000 {
				t.Errorf("errors are %d bytes long; an Event note holds 1 KB", len(msg))
			}
		})
	}
}

func TestNamesAreLiteralsExcludesExact(t *testing.T) {
	keys := DefaultKeys()
	cm := func(name string) source.ID { return source.ID{Kind: source.ConfigMap, Name: name} }
	tests := []struct {
		name       string
		meta       map[string]string
		cand       Candidate
		want       bool
		wantReason Reason
	}{
		{"a name with a dot is that name", map[string]string{keys.Reload[source.ConfigMap]: "app.config"}, Candidate{ID: cm("app.config")}, true, ReasonNamed},
		{"a name with a dot is no pattern", map[string]string{keys.Reload[source.ConfigMap]: "app.config"}, Candidate{ID: cm("app-config")}, false, ReasonNotReferenced},
		{"a pattern is anchored", map[string]string{keys.Reload[source.ConfigMap]: "app-.*"}, Candidate{ID: cm("app-config")}, true, ReasonNamed},
		{"exclude is exact", map[string]string{keys.Auto: "true", keys.Exclude[source.ConfigMap]: "app.config"}, Candidate{ID: cm("app-config"), Referenced: true}, true, ReasonAuto},
		{"exclude matches its name", map[string]string{keys.Auto: "true", keys.Exclude[source.ConfigMap]: "app.config"}, Candidate{ID: cm("app.config"), Referenced: true}, false, ReasonExcluded},
		{"exclude takes no patterns", map[string]string{keys.Auto: "true", keys.Exclude[source.ConfigMap]: "app-.*"}, Candidate{ID: cm("app-config"), Referenced: true}, true, ReasonAuto},
		{"over-size value is ignored, other rules stay", map[string]string{keys.Auto: "true", keys.Reload[source.ConfigMap]: hostileValue()}, Candidate{ID: cm("a"), Referenced: true}, true, ReasonAuto},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Policy{Keys: keys}
			r, _ := ParseRules(keys, tt.meta, nil)
			got, reason := p.Concerns(&r, tt.cand)
			if got != tt.want || reason != tt.wantReason {
				t.Errorf("Concerns() = %v (%s), want %v (%s)", got, reason, tt.want, tt.wantReason)
			}
		})
	}
	r, _ := ParseRules(keys, map[string]string{keys.Reload[source.ConfigMap]: "b, app.config ,x-.*"}, nil)
	if got := r.Literal[source.ConfigMap]; !slices.Equal(got, []string{"app.config", "b"}) {
		t.Errorf("literal names %v, want [app.config b]: their creation must be noticed", got)
	}
}

func TestParsedOncePerValue(t *testing.T) {
	keys := DefaultKeys()
	value := "app.config,feature-.*,db-[0-9]+"
	c := NewCaches()
	first, _ := c.ParseRules(keys, map[string]string{keys.Reload[source.ConfigMap]: value}, nil)
	for i := range 5000 {
		r, _ := c.ParseRules(keys, nil, map[string]string{keys.Reload[source.ConfigMap]: value, keys.Auto: "true"})
		if r.Named[source.ConfigMap] != first.Named[source.ConfigMap] {
			t.Fatalf("workload %d got its own parse of the same value", i)
		}
	}
	if bytes := allocated(func() {
		c.ParseRules(keys, map[string]string{keys.Reload[source.ConfigMap]: value}, nil)
	}); bytes > 4<<10 {
		t.Errorf("a cached parse allocated %d bytes", bytes)
	}
}

func TestCacheIsBounded(t *testing.T) {
	c := newParseCache(64 << 10)
	var sizes []int
	for i := range 2000 {
		v := "p-" + strings.Repeat("x", i%50) + "-[a-z]+," + strings.Repeat("n", 1+i%200)
		c.names(v, true)
		if c.used > c.budget {
			t.Fatalf("cache holds %d bytes over its budget of %d", c.used, c.budget)
		}
		sizes = append(sizes, c.len())
	}
	if c.len() == 0 || c.len() >= 2000 {
		t.Errorf("cache holds %d of 2000 values", c.len())
	}
	v := "recent-.*"
	n := c.names(v, true)
	if c.names(v, true) != n {
		t.Error("the most recent value was evicted")
	}
	if c.names(v, false) == n {
		t.Error("a value parsed as an exclude list shares the reload list's parse")
	}
}

func TestScanNamedCompilesNothing(t *testing.T) {
	keys := DefaultKeys()
	costly := strings.Repeat("(?:[a-z0-9]{999}x)", 12)
	meta := map[string]string{keys.Reload[source.ConfigMap]: "app.config," + costly, keys.Reload[source.Secret]: "db"}
	var got map[source.Kind]Named
	// Compiling the costly entry would take hundreds of KiB; the name validator's matcher, which
	// a GC may drop from its pool, takes up to about 40 KiB.
	if bytes := allocated(func() { got = ScanNamed(keys, meta, nil) }); bytes > 64<<10 {
		t.Errorf("scanning allocated %d bytes", bytes)
	}
	want := map[source.Kind]Named{source.ConfigMap: {Literal: []string{"app.config"}, Patterns: true}, source.Secret: {Literal: []string{"db"}}}
	if len(got) != len(want) || !slices.Equal(got[source.ConfigMap].Literal, want[source.ConfigMap].Literal) ||
		got[source.ConfigMap].Patterns != true || !slices.Equal(got[source.Secret].Literal, []string{"db"}) || got[source.Secret].Patterns {
		t.Errorf("ScanNamed = %v, want %v", got, want)
	}
	if got := ScanNamed(keys, map[string]string{keys.Reload[source.ConfigMap]: hostileValue()}, nil); len(got) != 0 {
		t.Errorf("an over-size value was indexed: %v", got)
	}
}

// The hostile value costs the size check only; a value at the limits costs one parse, then
// nothing while cached.
func BenchmarkParseNames(b *testing.B) {
	for name, v := range map[string]string{"hostile-200KB": hostileValue(), "worst-within-limits": worstWithinLimits()} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				parseNames(v, true)
			}
		})
	}
	b.Run("cached", func(b *testing.B) {
		keys := DefaultKeys()
		meta := map[string]string{keys.Reload[source.ConfigMap]: worstWithinLimits(), keys.Auto: "true"}
		c := NewCaches()
		b.ReportAllocs()
		for b.Loop() {
			c.ParseRules(keys, meta, nil)
		}
	})
}
