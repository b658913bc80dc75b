package flap

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/whatchanged"
)

var t0 = time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)

// series builds changes: contents (the hash after each change, starting from "0"), writers
// (one manager per change, "" for unknown) and the gap between changes.
func series(contents string, writers []string, gap time.Duration) []Change {
	var out []Change
	from := "0"
	for i, c := range strings.Split(contents, "") {
		w := whatchanged.Writer{}
		if i < len(writers) && writers[i] != "" {
			w = whatchanged.Writer{Manager: writers[i], Operation: "Update", Time: t0.Add(time.Duration(i) * gap)}
		}
		out = append(out, Change{At: t0.Add(time.Duration(i) * gap), Version: fmt.Sprint(i + 1), From: from, To: c, Writer: w})
		from = c
	}
	return out
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func alternate(a, b string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = a
		if i%2 == 1 {
			out[i] = b
		}
	}
	return out
}

func TestDetection(t *testing.T) {
	l := Defaults()
	tests := []struct {
		name    string
		changes []Change
		// trips is the 1-based change that begins the quarantine, 0 for none.
		trips int
		seen  []string
	}{
		{"one release", series("1", []string{"helm"}, 0), 0, nil},
		{"a revert", series("10", repeat("helm", 2), time.Minute), 0, nil},
		{"a revert of a revert", series("101", repeat("helm", 3), time.Minute), 0, nil},
		{"a CI burst counts once", series("123456789abcdef", repeat("ci", 15), time.Second), 0, nil},
		{"eight changes a minute apart", series("12345678", repeat("vault", 8), time.Minute), 0, nil},
		{"a rotation every minute", series("123456789abc", repeat("vault", 12), time.Minute), 9, []string{SeenTooOften}},
		{"rotations spread past the window", series("123456789abc", repeat("vault", 12), 2*time.Minute+time.Second), 0, nil},
		{"oscillation", series("1010", repeat("cert-manager", 4), 20*time.Second), 4, []string{SeenOscillating}},
		{"helm and a human, twice", series("1234", []string{"helm", "kubectl-edit", "helm", "kubectl-edit"}, time.Minute), 0, nil},
		{"two writers fighting", series("12345", alternate("writer-a", "writer-b", 5), 20*time.Second), 5, []string{SeenAlternating}},
		{"two writers alternating content", series("1010101", alternate("writer-a", "writer-b", 7), 3*time.Second), 4, []string{SeenOscillating}},
		{"unknown writers never switch", series("12345678", nil, 20*time.Second), 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := NewTable(l, 0)
			k := Key{"ns", "secret", "s"}
			trips := 0
			var q *Quarantine
			for i, c := range tt.changes {
				if began, _ := tab.Observe(k, c, nil); began != nil && trips == 0 {
					trips, q = i+1, began
				}
			}
			if trips != tt.trips {
				t.Fatalf("tripped at change %d, want %d", trips, tt.trips)
			}
			if q != nil && !slices.Equal(q.Seen, tt.seen) {
				t.Errorf("seen %v, want %v", q.Seen, tt.seen)
			}
		})
	}
}

func TestQuarantineLifecycle(t *testing.T) {
	l := Limits{MaxChanges: 3, Window: time.Minute, Quiet: 30 * time.Second}
	tab := NewTable(l, 0)
	k := Key{"ns", "secret", "s"}
	changes := series("10101010", alternate("writer-a", "writer-b", 8), 2*time.Second)
	for _, c := range changes {
		tab.Observe(k, c, nil)
	}
	// The same change heard by a second watch counts once.
	tab.Observe(k, changes[len(changes)-1], nil)
	last := changes[len(changes)-1].At
	q, ok := tab.Status(k, last.Add(time.Second))
	if !ok {
		t.Fatal("not in quarantine after an oscillation")
	}
	if !q.Last.Equal(last) || !q.Until().Equal(last.Add(30*time.Second)) {
		t.Errorf("last %v until %v, want %v and 30s later", q.Last, q.Until(), last)
	}
	what := q.What()
	for _, want := range []string{"field managers writer-a (Update at", "writer-b (Update at", "(reported by the API server)", "alternately", "returned to an earlier state"} {
		if !strings.Contains(what, want) {
			t.Errorf("What() = %q, lacks %q", what, want)
		}
	}
	if n := tab.Quarantined(last.Add(time.Second)); n != 1 {
		t.Errorf("Quarantined = %d, want 1", n)
	}
	// Quiet long enough: over, and the history forgotten: a single change then does not trip.
	if _, ok := tab.Status(k, last.Add(30*time.Second)); ok {
		t.Fatal("still in quarantine after quiet")
	}
	if n := tab.Quarantined(last.Add(30 * time.Second)); n != 0 {
		t.Errorf("Quarantined = %d after quiet, want 0", n)
	}
	next := Change{At: last.Add(40 * time.Second), Version: "100", From: "0", To: "9"}
	if began, _ := tab.Observe(k, next, nil); began != nil {
		t.Error("a single change after quiet began a quarantine")
	}
}

func TestRelease(t *testing.T) {
	l := Limits{MaxChanges: 2, Window: time.Minute, Quiet: time.Hour}
	tab := NewTable(l, 0)
	k := Key{"ns", "configmap", "c"}
	for _, c := range series("1234", nil, 20*time.Second) {
		tab.Observe(k, c, nil)
	}
	q, ok := tab.Status(k, t0.Add(time.Minute+time.Second))
	if !ok {
		t.Fatal("not in quarantine")
	}
	if tab.Release(k, q.Since.Add(-time.Second), t0.Add(2*time.Minute)) {
		t.Error("a release older than the quarantine released it")
	}
	if !tab.Release(k, q.Since, t0.Add(2*time.Minute)) {
		t.Error("a release at the quarantine's start did not release it")
	}
	if _, ok := tab.Status(k, t0.Add(2*time.Minute)); ok {
		t.Error("still in quarantine after release")
	}
	// The release stays on the source: a later flap is not released by it.
	for _, c := range series("5678", nil, 20*time.Second) {
		c.At = c.At.Add(10 * time.Minute)
		c.Version += "b"
		tab.Observe(k, c, nil)
	}
	if _, ok := tab.Status(k, t0.Add(12*time.Minute)); !ok {
		t.Error("a later flap was released by an earlier release")
	}
}

func TestAdopt(t *testing.T) {
	tab := NewTable(Defaults(), 0)
	k := Key{"ns", "secret", "s"}
	q := Quarantine{Since: t0, Last: t0.Add(time.Minute), Quiet: 5 * time.Minute, Seen: []string{SeenOscillating}}
	tab.Adopt(k, q, t0.Add(10*time.Minute)) // over already: not adopted
	if _, ok := tab.Status(k, t0.Add(10*time.Minute)); ok {
		t.Fatal("adopted a quarantine that was over")
	}
	tab.Adopt(k, q, t0.Add(2*time.Minute))
	if _, ok := tab.Status(k, t0.Add(2*time.Minute)); !ok {
		t.Fatal("did not adopt")
	}
	// A change heard since extends it.
	tab.Observe(k, Change{At: t0.Add(5 * time.Minute), Version: "9", From: "a", To: "b"}, nil)
	if got, ok := tab.Status(k, t0.Add(7*time.Minute)); !ok || !got.Last.Equal(t0.Add(5*time.Minute)) {
		t.Errorf("after a change: %v %v, want last at +5m", got.Last, ok)
	}
}

func TestBounds(t *testing.T) {
	tab := NewTable(Limits{MaxChanges: 1, Window: time.Minute, Quiet: time.Hour}, 3)
	quarantined := Key{"ns", "secret", "q"}
	for _, c := range series("12", nil, 20*time.Second) {
		tab.Observe(quarantined, c, nil)
	}
	for i := range 10 {
		c := Change{At: t0.Add(time.Duration(i) * time.Second), Version: fmt.Sprint(i), From: "a", To: "b"}
		tab.Observe(Key{"ns", "secret", fmt.Sprint(i)}, c, nil)
	}
	if len(tab.m) > 3 {
		t.Errorf("table holds %d sources, want at most 3", len(tab.m))
	}
	if _, ok := tab.Status(quarantined, t0.Add(time.Minute)); !ok {
		t.Error("the quarantined source was evicted before the quiet ones")
	}
	var s state
	s.limits = Limits{Window: time.Hour}
	for i := range 200 {
		s.observe(Change{At: t0.Add(time.Duration(i) * time.Second), Version: fmt.Sprint(i), From: fmt.Sprint(i), To: fmt.Sprint(i + 1)})
	}
	if len(s.changes) > maxHistory {
		t.Errorf("history holds %d changes, want at most %d", len(s.changes), maxHistory)
	}
}

func TestBreakerOff(t *testing.T) {
	tab := NewTable(Defaults(), 0)
	k := Key{"ns", "secret", "s"}
	for _, c := range series("1010101010", alternate("a", "b", 10), time.Second) {
		if began, _ := tab.Observe(k, c, map[string]string{MaxChangesAnnotation: "0"}); began != nil {
			t.Fatal("a source with flap-max-changes 0 was quarantined")
		}
	}
}

func TestParseLimits(t *testing.T) {
	def := Defaults()
	tests := []struct {
		name string
		ann  map[string]string
		want Limits
		bad  int
	}{
		{"none", nil, def, 0},
		{"all set", map[string]string{MaxChangesAnnotation: " 20 ", WindowAnnotation: "1h", QuietAnnotation: "30s"}, Limits{20, time.Hour, 30 * time.Second}, 0},
		{"off", map[string]string{MaxChangesAnnotation: "0"}, Limits{0, def.Window, def.Quiet}, 0},
		{"negative", map[string]string{MaxChangesAnnotation: "-1"}, def, 1},
		{"too many", map[string]string{MaxChangesAnnotation: "1001"}, def, 1},
		{"not a number", map[string]string{MaxChangesAnnotation: "lots"}, def, 1},
		{"window too short", map[string]string{WindowAnnotation: "10ms"}, def, 1},
		{"quiet too long", map[string]string{QuietAnnotation: "25h"}, def, 1},
		{"quiet not a duration", map[string]string{QuietAnnotation: "soon", WindowAnnotation: "2m"}, Limits{def.MaxChanges, 2 * time.Minute, def.Quiet}, 1},
		{"huge value", map[string]string{WindowAnnotation: strings.Repeat("9", 10000) + "s"}, def, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := ParseLimits(tt.ann, def)
			if got != tt.want || len(errs) != tt.bad {
				t.Errorf("ParseLimits = %+v, %v; want %+v and %d errors", got, errs, tt.want, tt.bad)
			}
			for _, err := range errs {
				if len(err.Error()) > 300 {
					t.Errorf("error of %d bytes echoes the input", len(err.Error()))
				}
			}
		})
	}
}

func TestParseRelease(t *testing.T) {
	now := t0.Add(time.Hour)
	tests := []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"2026-11-27T00:30:00Z", t0.Add(30 * time.Minute), true},
		{" 2026-11-27T01:01:00+00:00 ", t0.Add(61 * time.Minute), true}, // within the skew
		{"2026-11-27T02:00:00Z", time.Time{}, false},                    // the future
		{"yesterday", time.Time{}, false},
		{"", time.Time{}, false},
		{strings.Repeat("x", 100), time.Time{}, false},
	}
	for _, tt := range tests {
		got, err := ParseRelease(tt.in, now)
		if (err == nil) != tt.ok || !got.Equal(tt.want) {
			t.Errorf("ParseRelease(%q) = %v, %v; want %v, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
	since := t0.Add(30*time.Minute + 500*time.Millisecond)
	if !Releases(t0.Add(30*time.Minute), since) {
		t.Error("a release at the second a quarantine began does not release it")
	}
	if Releases(t0.Add(29*time.Minute), since) {
		t.Error("a release before a quarantine began releases it")
	}
}

func testKey(t testing.TB, b byte) hash.Key {
	k, err := hash.NewKey([]byte(strings.Repeat(string(b), hash.KeySize)))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestRecord(t *testing.T) {
	entries := []Entry{
		{Source: "secret/creds", Since: t0, Last: t0.Add(time.Minute), Quiet: 5 * time.Minute, Seen: []string{SeenOscillating, SeenAlternating}},
		{Source: "configmap/app.cfg", Since: t0, Last: t0, Quiet: time.Second},
	}
	got, err := Decode(Encode(entries))
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{entries[1], entries[0]}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("round trip = %v, want %v", got, want)
	}
	key, other := testKey(t, 1), testKey(t, 2)
	s := Subject{Kind: "Deployment", Namespace: "ns", Name: "web", UID: "u1"}
	v := Seal(key, s, entries)
	if got, err := Open(key, s, v); err != nil || len(got) != 2 {
		t.Fatalf("Open = %v, %v", got, err)
	}
	refused := map[string]struct {
		key hash.Key
		s   Subject
		v   string
	}{
		"another key":          {other, s, v},
		"another workload":     {key, Subject{"Deployment", "ns", "api", "u1"}, v},
		"the workload anew":    {key, Subject{"Deployment", "ns", "web", "u2"}, v},
		"changed payload":      {key, s, strings.Replace(v, "secret/creds", "secret/other", 1)},
		"no MAC":               {key, s, Encode(entries)},
		"forged without a key": {hash.Key{}, s, v},
	}
	for name, tt := range refused {
		if _, err := Open(tt.key, tt.s, tt.v); err == nil {
			t.Errorf("%s: record accepted", name)
		}
	}
	if peeked, err := Peek(v); err != nil || len(peeked) != 2 {
		t.Errorf("Peek = %v, %v", peeked, err)
	}
	if Seal(hash.Key{}, s, entries) != "" {
		t.Error("sealed without a key")
	}
}

func TestDecodeRefuses(t *testing.T) {
	for _, v := range []string{
		"", "v2", "v1 secret/s 1 2", "v1 secret/s 2 1 5 -", "v1 secret/s 1 2 0 -", "v1 Secret/s 1 2 5 -",
		"v1 secret/s 1 2 5 bogus", "v1 secret/s 1 2 5 too-often+too-often", "v1 secret/a\x1b 1 2 5 -",
		"v1 secret/s 0 2 5 -", "v1 secret/s 1 2 999999999 -", "v1 secret/s x 2 5 -",
		"v1" + strings.Repeat(" secret/s 1 2 5 -", MaxEntries+1),
	} {
		if _, err := Decode(v); err == nil {
			t.Errorf("Decode(%q) accepted", v)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Encode([]Entry{{Source: "secret/s", Since: t0, Last: t0, Quiet: time.Minute, Seen: []string{SeenTooOften}}}))
	f.Add("v1 secret/s 1 2 5 -")
	f.Fuzz(func(t *testing.T, v string) {
		es, err := Decode(v)
		if err != nil {
			return
		}
		if len(es) > MaxEntries {
			t.Fatalf("%d entries", len(es))
		}
		again, err := Decode(Encode(es))
		if err != nil || fmt.Sprint(again) != fmt.Sprint(Sorted(es)) {
			t.Fatalf("re-encoding %v gave %v, %v", es, again, err)
		}
	})
}

// Sorted orders entries as Encode writes them.
func Sorted(es []Entry) []Entry {
	out := slices.Clone(es)
	slices.SortStableFunc(out, func(a, b Entry) int { return strings.Compare(a.Source, b.Source) })
	return out
}

func FuzzOpen(f *testing.F) {
	key := testKey(f, 7)
	s := Subject{Kind: "Deployment", Namespace: "ns", Name: "web", UID: "u"}
	f.Add(Seal(key, s, []Entry{{Source: "secret/s", Since: t0, Last: t0, Quiet: time.Minute}}))
	f.Add("v1;mac=00")
	f.Fuzz(func(t *testing.T, v string) {
		if es, err := Open(key, s, v); err == nil && !strings.EqualFold(Seal(key, s, es), v) {
			// Only what reloader sealed opens: re-sealing it gives it back.
			t.Fatalf("opened %q, which reloader would seal as %q", v, Seal(key, s, es))
		}
	})
}

func FuzzParseLimits(f *testing.F) {
	f.Add("8", "15m", "5m")
	f.Add("-1", "0s", "1e9h")
	f.Fuzz(func(t *testing.T, n, w, q string) {
		l, _ := ParseLimits(map[string]string{MaxChangesAnnotation: n, WindowAnnotation: w, QuietAnnotation: q}, Defaults())
		if err := l.Validate(); err != nil {
			t.Fatalf("ParseLimits gave limits out of bounds: %v", err)
		}
	})
}

func FuzzParseRelease(f *testing.F) {
	f.Add("2026-11-27T00:00:00Z")
	f.Add("9999-12-31T23:59:59+14:00")
	f.Fuzz(func(t *testing.T, v string) {
		at, err := ParseRelease(v, t0)
		if err == nil && at.After(t0.Add(releaseSkew)) {
			t.Fatalf("accepted a release in the future: %v", at)
		}
	})
}

func TestEntryStaysSmall(t *testing.T) {
	// A full table is defaultMaxSources sources of maxHistory entries: about 10 MiB at 40 bytes.
	if n := unsafe.Sizeof(entry{}); n > 40 {
		t.Errorf("entry is %d bytes, want at most 40", n)
	}
}

// A namespace that churns thousands of sources evicts its own history, never another
// namespace's: B's restart loop, heard before and after A's flood, is still quarantined.
func TestFloodOfOneNamespaceKeepsAnothersHistory(t *testing.T) {
	tab := NewTable(Defaults(), 0)
	b := Key{"tenant-b", "secret", "creds"}
	loop := series("1010", repeat("cert-manager", 4), 20*time.Second)
	for _, c := range loop[:3] {
		if began, _ := tab.Observe(b, c, nil); began != nil {
			t.Fatal("quarantined before the loop repeats")
		}
	}
	// A's flood lands between B's changes, each source newer than B's latest change.
	flood := loop[2].At
	for i := range 5000 {
		at := flood.Add(time.Duration(i) * time.Millisecond)
		tab.Observe(Key{"tenant-a", "configmap", fmt.Sprint("cm-", i)}, Change{At: at, Version: fmt.Sprint(i + 10), From: "x", To: "y"}, nil)
	}
	if n, max := tab.shares.Of("tenant-a"), defaultMaxSources/namespaceShare; n > max {
		t.Errorf("tenant-a holds %d sources, want at most its share %d", n, max)
	}
	if len(tab.m) > defaultMaxSources || len(tab.m) != tab.shares.Len() {
		t.Errorf("table holds %d sources (%d counted), want at most %d", len(tab.m), tab.shares.Len(), defaultMaxSources)
	}
	began, _ := tab.Observe(b, loop[3], nil)
	if began == nil {
		t.Fatal("tenant-b's oscillation was not quarantined after tenant-a's flood: its history was evicted")
	}
	if !slices.Equal(began.Seen, []string{SeenOscillating}) {
		t.Errorf("seen %v, want %v", began.Seen, []string{SeenOscillating})
	}
	// Forget keeps the counts true.
	tab.Forget(b)
	if tab.shares.Of("tenant-b") != 0 || len(tab.m) != tab.shares.Len() {
		t.Errorf("after Forget: tenant-b counts %d, table %d, counted %d", tab.shares.Of("tenant-b"), len(tab.m), tab.shares.Len())
	}
}
