package waves

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func dep(name string) Ref { return Ref{Kind: "deployment", Name: name} }

func members(n int) []Member {
	var ms []Member
	for i := range n {
		ms = append(ms, Member{Ref: dep(fmt.Sprintf("web-%02d", i))})
	}
	return ms
}

func TestWaveSizes(t *testing.T) {
	for _, tc := range []struct {
		n     int
		sizes []int
	}{
		{1, []int{1}},
		{2, []int{1, 1}},
		{3, []int{1, 2}},
		{7, []int{1, 2, 4}},
		{40, []int{1, 2, 4, 8, 16, 9}},
	} {
		o := Plan(members(tc.n), true)
		sizes := make([]int, o.Waves)
		for _, w := range o.Wave {
			sizes[w]++
		}
		if !slices.Equal(sizes, tc.sizes) {
			t.Errorf("%d members: waves of %v, want %v", tc.n, sizes, tc.sizes)
		}
	}
	if o := Plan(members(5), false); o.Waves != 1 || slices.Max(o.Wave) != 0 {
		t.Errorf("waves off: %d waves %v, want every member in wave 0", o.Waves, o.Wave)
	}
	if o := Plan(nil, true); o.Waves != 0 || len(o.Members) != 0 {
		t.Errorf("no members: %+v", o)
	}
}

func TestOrderIsDeterministicCanariesFirst(t *testing.T) {
	ms := members(6)
	ms[4].Canary = true
	ms = append(ms, Member{Ref: Ref{Kind: "statefulset", Name: "a"}})
	o := Plan(ms, true)
	reversed := slices.Clone(ms)
	slices.Reverse(reversed)
	if !slices.EqualFunc(o.Members, Plan(reversed, true).Members, func(a, b Member) bool { return a.Ref == b.Ref }) {
		t.Errorf("order depends on the input order")
	}
	got := refs(o.Members)
	want := []string{"deployment/web-04", "deployment/web-00", "deployment/web-01", "deployment/web-02", "deployment/web-03", "deployment/web-05", "statefulset/a"}
	if !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
	// Two canaries make the first wave.
	ms[1].Canary = true
	o = Plan(ms, true)
	if got := refs(o.Members[:2]); !slices.Equal(got, []string{"deployment/web-01", "deployment/web-04"}) || o.Wave[1] != 0 || o.Wave[2] != 1 {
		t.Errorf("two canaries: %v waves %v", refs(o.Members), o.Wave)
	}
}

func refs(ms []Member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.String())
	}
	return out
}

func TestAfterOrdersAndCyclesAreRefused(t *testing.T) {
	ms := members(5)
	ms[0].After = []Ref{dep("web-03"), dep("not-a-member")} // web-00 after web-03
	ms[1].After = []Ref{dep("web-02")}                      // web-01 <-> web-02: a cycle
	ms[2].After = []Ref{dep("web-01")}
	ms[4].After = []Ref{dep("web-04")} // after itself
	o := Plan(ms, true)
	got := refs(o.Members)
	p0, _ := o.Position(dep("web-00"))
	p3, _ := o.Position(dep("web-03"))
	if p3 > p0 {
		t.Errorf("web-00 rolls after web-03, but the order is %v", got)
	}
	if len(o.Cycles) != 2 {
		t.Fatalf("cycles %v, want web-01/web-02 and web-04", o.Cycles)
	}
	if c, ok := o.OnCycle(dep("web-02")); !ok || !slices.Equal(c, []Ref{dep("web-01"), dep("web-02")}) {
		t.Errorf("web-02's cycle %v", c)
	}
	if _, ok := o.OnCycle(dep("web-00")); ok {
		t.Errorf("web-00 is on no cycle")
	}
	// A workload on a cycle rolls as if without after: never waits for its cycle.
	all := func(Ref) Status { return Status{State: Pending, Why: "pending"} }
	ow := Plan(ms, false)
	if v := ow.Gate(dep("web-01"), false, all); v.Reason != "" {
		t.Errorf("web-01 on a cycle held: %+v", v)
	}
	if v := ow.Gate(dep("web-00"), false, all); v.Reason != HoldWave || v.Blocker != dep("web-03") {
		t.Errorf("web-00 after web-03: %+v", v)
	}
}

func TestGate(t *testing.T) {
	o := Plan(members(40), true)
	at := func(i int) Ref { return o.Members[i].Ref }
	state := map[Ref]Status{}
	var asked []Ref
	status := func(r Ref) Status {
		asked = append(asked, r)
		if s, ok := state[r]; ok {
			return s
		}
		return Status{State: Pending, Why: "not applied"}
	}
	// The canary is never held.
	if v := o.Gate(at(0), false, status); v.Reason != "" {
		t.Errorf("canary held: %+v", v)
	}
	// Everyone else waits for the canary, reading the canary alone.
	asked = nil
	v := o.Gate(at(39), false, status)
	if v.Reason != HoldWave || v.Blocker != at(0) || v.Wave != 5 || v.Waves != 6 || len(asked) != 1 {
		t.Errorf("last waits: %+v after asking %v", v, asked)
	}
	if msg := v.Message("configmap/shared", "shop", "abc"); !strings.Contains(msg, "wave 6 of 6") || !strings.Contains(msg, "deployment/web-00") {
		t.Errorf("message %q", msg)
	}
	// The canary rolling: wave 1 waits for it.
	state[at(0)] = Status{State: Rolling, Why: "0 of 1 replicas updated"}
	if v := o.Gate(at(1), false, status); v.Reason != HoldWave || v.Why != "0 of 1 replicas updated" {
		t.Errorf("wave 1 while the canary rolls: %+v", v)
	}
	// Stalled: every later wave is halted, until resumed.
	state[at(0)] = Status{State: Stalled, Why: "ProgressDeadlineExceeded"}
	for _, i := range []int{1, 2, 3, 20, 39} {
		if v := o.Gate(at(i), false, status); v.Reason != HoldHalted || v.Blocker != at(0) {
			t.Errorf("member %d after the canary stalled: %+v", i, v)
		}
	}
	if msg := o.Gate(at(1), false, status).Message("configmap/shared", "shop", "abc"); !strings.Contains(msg, "halted at content abc") || !strings.Contains(msg, "resume|abort configmap/shared -n shop") {
		t.Errorf("halted message %q", msg)
	}
	if v := o.Gate(at(1), true, status); v.Reason != "" {
		t.Errorf("wave 1 resumed: %+v", v)
	}
	// Canary done: wave 1 (2 members) rolls; wave 2 waits for them.
	state[at(0)] = Status{State: Done}
	if v := o.Gate(at(2), false, status); v.Reason != "" {
		t.Errorf("wave 1 after the canary completed: %+v", v)
	}
	if v := o.Gate(at(3), false, status); v.Reason != HoldWave || v.Blocker != at(1) {
		t.Errorf("wave 2 before wave 1 rolled: %+v", v)
	}
	// A stall later in the waiting wave still halts.
	state[at(2)] = Status{State: Stalled, Why: "pods not ready"}
	if v := o.Gate(at(10), false, status); v.Reason != HoldHalted || v.Blocker != at(2) {
		t.Errorf("a stall in wave 1 behind a pending member: %+v", v)
	}
	// All of waves 0-4 done: the last wave rolls; the scan reads each once.
	for i := range 31 {
		state[at(i)] = Status{State: Done}
	}
	asked = nil
	if v := o.Gate(at(35), false, status); v.Reason != "" || len(asked) != 31 {
		t.Errorf("last wave: %+v after asking %d", v, len(asked))
	}
	if v := o.Gate(dep("stranger"), false, status); v.Reason != "" {
		t.Errorf("a non-member held: %+v", v)
	}
}

func TestMatches(t *testing.T) {
	cm := "0123456789abcdef0123"
	secret := "key1:fedcba9876543210"
	for _, tc := range []struct {
		v, hash string
		want    bool
	}{
		{cm, cm, true},
		{Short(cm), cm, true},
		{"0123456789ab", cm, true},
		{"0123456789a", cm, false}, // too short
		{"1123456789ab", cm, false},
		{Short(secret), secret, true},
		{secret, secret, true},
		{"", cm, false},
		{cm, "", false},
	} {
		if got := Matches(tc.v, tc.hash); got != tc.want {
			t.Errorf("Matches(%q, %q) = %v, want %v", tc.v, tc.hash, got, tc.want)
		}
	}
	if Short(secret) != "fedcba987654" {
		t.Errorf("Short(%q) = %q", secret, Short(secret))
	}
}

func knownKinds(k string) (string, bool) {
	switch k {
	case "deployment", "deploy", "deployments":
		return "deployment", true
	case "statefulset", "sts":
		return "statefulset", true
	}
	return "", false
}

func TestParseAfter(t *testing.T) {
	refs, errs := ParseAfter(" deployment/db, sts/cache,deploy/db,,Deployment/x ", knownKinds)
	if want := []Ref{dep("db"), {Kind: "statefulset", Name: "cache"}, dep("x")}; !slices.Equal(refs, want) || len(errs) != 0 {
		t.Errorf("refs %v errs %v, want %v", refs, errs, want)
	}
	refs, errs = ParseAfter("db,pod/x,deployment/Bad_Name,deployment/a/b,deployment/ok", knownKinds)
	if !slices.Equal(refs, []Ref{dep("ok")}) || len(errs) != 4 {
		t.Errorf("refs %v errs %v: want deployment/ok and 4 errors", refs, errs)
	}
	if refs, errs := ParseAfter(strings.Repeat("deployment/a,", MaxAfter), knownKinds); refs != nil || len(errs) != 1 {
		t.Errorf("past the count: refs %v errs %v", refs, errs)
	}
	if refs, errs := ParseAfter(strings.Repeat("x", MaxAfterBytes+1), knownKinds); refs != nil || len(errs) != 1 {
		t.Errorf("past the length: refs %v errs %v", refs, errs)
	}
}

// FuzzParseAfter checks that any after annotation parses within its bounds, into valid
// references, and that a plan over them never loses or invents a member.
func FuzzParseAfter(f *testing.F) {
	for _, seed := range []string{"deployment/db", " a/b ,sts/c,,", "deployment/db,deployment/db", strings.Repeat("deploy/x,", 40), "\x00/\xff", "deployment/é"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		refs, errs := ParseAfter(v, knownKinds)
		if len(refs) > MaxAfter || len(errs) > MaxAfter {
			t.Fatalf("%d refs, %d errors: past the bounds", len(refs), len(errs))
		}
		for _, r := range refs {
			if r.Kind != "deployment" && r.Kind != "statefulset" || r.Name == "" || strings.ContainsAny(r.Name, "/, ") || !utf8.ValidString(r.Name) {
				t.Fatalf("invalid ref %q from %q", r, v)
			}
		}
		ms := []Member{{Ref: dep("db"), After: refs}, {Ref: dep("x"), After: []Ref{dep("db")}}, {Ref: Ref{Kind: "statefulset", Name: "c"}, After: refs}}
		o := Plan(ms, true)
		if len(o.Members) != len(ms) {
			t.Fatalf("plan of %d members has %d", len(ms), len(o.Members))
		}
		for _, m := range ms {
			if v := o.Gate(m.Ref, false, func(Ref) Status { return Status{State: Done} }); v.Reason != "" {
				t.Fatalf("%s held when every member is done: %+v", m.Ref, v)
			}
		}
	})
}
