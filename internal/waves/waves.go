// Package waves decides, purely, the health-gated waves in which the workloads that one
// shared source concerns roll: their order (a canary, then waves of 2, 4, 8, ... over the
// rest, `reloader.dev/after` edges honoured), and, for one workload, whether the workloads
// before it have applied the source's content and completed their rollouts (the gate). The
// controller (internal/controller/waves.go) reads the members and their state from the
// cache; nothing here is remembered between reconciles, so every replica, and a restarted
// one, decides the same from the same objects.
package waves

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Annotations. On a source: Annotation opts it into waves whatever the number of workloads;
// ResumeAnnotation and AbortAnnotation name the content hash an operator's resume or abort
// applies to (so that it never applies to a newer content). On a workload: CanaryAnnotation
// makes it the first to roll; AfterAnnotation names workloads it rolls after.
const (
	Annotation       = "reloader.dev/waves"
	CanaryAnnotation = "reloader.dev/canary"
	AfterAnnotation  = "reloader.dev/after"
	ResumeAnnotation = "reloader.dev/waves-resume"
	AbortAnnotation  = "reloader.dev/waves-abort"
)

// Hold reasons: the values of reloader_reloads_waiting's reason label for a reload that a
// wave holds (HoldWave) or that a stalled rollout before it halted (HoldHalted).
const (
	HoldWave   = "wave"
	HoldHalted = "waves-halted"
)

// Ref names a workload in the source's namespace: its kind's lower-case name and its name.
type Ref struct {
	Kind, Name string
}

func (r Ref) String() string { return r.Kind + "/" + r.Name }

func compareRefs(a, b Ref) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
}

// Member is one workload that the source concerns.
type Member struct {
	Ref
	// Canary is true when the workload is annotated as a canary.
	Canary bool
	// After are the workloads it rolls after (AfterAnnotation, parsed); those that are not
	// members are left out by Plan.
	After []Ref
}

// Order is the roll order of a source's members: Members in order, and each one's wave.
type Order struct {
	Members []Member
	// Wave is the wave of each member, by position; with waves off, all are in wave 0 (only
	// `after` edges order them then).
	Wave []int
	// Waves is the number of waves.
	Waves int
	// Cycles are the cycles found among the after edges, each as its members in order; the
	// after edges of a workload on a cycle are ignored.
	Cycles [][]Ref
	index  map[Ref]int
	// after are the edges kept, by position: the positions each member rolls after.
	after [][]int
}

// Plan orders members: a topological order of the after edges (those from workloads on a
// cycle ignored), ties broken by canary first, then kind and name. With waves on, the first
// wave holds the canaries (the annotated ones, at least one: else the first by kind and
// name), and the waves after it hold 2, 4, 8, ... of the rest. It is deterministic: the same
// members, in any order, give the same Order.
func Plan(members []Member, waves bool) Order {
	ms := slices.Clone(members)
	slices.SortFunc(ms, func(a, b Member) int { return compareRefs(a.Ref, b.Ref) })
	ms = slices.CompactFunc(ms, func(a, b Member) bool { return a.Ref == b.Ref })
	idx := make(map[Ref]int, len(ms))
	for i, m := range ms {
		idx[m.Ref] = i
	}
	edges := make([][]int, len(ms))
	for i, m := range ms {
		for _, a := range m.After {
			if j, ok := idx[a]; ok && !slices.Contains(edges[i], j) {
				edges[i] = append(edges[i], j)
			}
		}
	}
	cyclic, cycles := findCycles(ms, edges)
	for i := range edges {
		if cyclic[i] {
			edges[i] = nil
		}
	}
	order := topological(ms, edges)
	o := Order{index: make(map[Ref]int, len(ms)), Cycles: cycles}
	pos := make([]int, len(ms))
	for p, i := range order {
		pos[i] = p
		o.Members = append(o.Members, ms[i])
		o.index[ms[i].Ref] = p
	}
	o.after = make([][]int, len(ms))
	for i, es := range edges {
		for _, j := range es {
			o.after[pos[i]] = append(o.after[pos[i]], pos[j])
		}
		slices.Sort(o.after[pos[i]])
	}
	o.Wave = make([]int, len(ms))
	if !waves || len(ms) == 0 {
		o.Waves = min(len(ms), 1)
		return o
	}
	canaries := 0
	for _, m := range o.Members {
		if m.Canary {
			canaries++
		}
	}
	first := max(canaries, 1)
	wave, size, left := 0, first, first
	for p := range o.Members {
		if left == 0 {
			wave++
			size = 1 << wave // 2, 4, 8, ...
			left = size
		}
		o.Wave[p] = wave
		left--
	}
	o.Waves = wave + 1
	return o
}

// topological orders the members so that each comes after those it has edges to, taking
// among the ready ones the canary first, then the least by kind and name (ms is sorted so).
func topological(ms []Member, edges [][]int) []int {
	n := len(ms)
	blocking := make([]int, n) // how many of its predecessors are not placed yet
	next := make([][]int, n)   // who waits for it
	for i, es := range edges {
		blocking[i] = len(es)
		for _, j := range es {
			next[j] = append(next[j], i)
		}
	}
	less := func(a, b int) int {
		if ms[a].Canary != ms[b].Canary {
			if ms[a].Canary {
				return -1
			}
			return 1
		}
		return cmp.Compare(a, b)
	}
	var ready, out []int
	for i := range n {
		if blocking[i] == 0 {
			ready = append(ready, i)
		}
	}
	for len(ready) > 0 {
		slices.SortFunc(ready, less)
		i := ready[0]
		ready = ready[1:]
		out = append(out, i)
		for _, w := range next[i] {
			if blocking[w]--; blocking[w] == 0 {
				ready = append(ready, w)
			}
		}
	}
	return out
}

// findCycles marks the members on a cycle of edges (a strongly connected component of more
// than one, or a member after itself) and returns each cycle's members, in kind and name
// order (Tarjan's algorithm; members are few, bounded by the source's users).
func findCycles(ms []Member, edges [][]int) (cyclic []bool, cycles [][]Ref) {
	n := len(ms)
	cyclic = make([]bool, n)
	index, low := make([]int, n), make([]int, n)
	for i := range index {
		index[i] = -1
	}
	onStack := make([]bool, n)
	var stack []int
	counter := 0
	var visit func(v int)
	visit = func(v int) {
		index[v], low[v] = counter, counter
		counter++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range edges[v] {
			switch {
			case index[w] < 0:
				visit(w)
				low[v] = min(low[v], low[w])
			case onStack[w]:
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var scc []int
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			scc = append(scc, w)
			if w == v {
				break
			}
		}
		if len(scc) == 1 && !slices.Contains(edges[v], v) {
			return
		}
		slices.Sort(scc)
		var refs []Ref
		for _, w := range scc {
			cyclic[w] = true
			refs = append(refs, ms[w].Ref)
		}
		cycles = append(cycles, refs)
	}
	for v := range n {
		if index[v] < 0 {
			visit(v)
		}
	}
	slices.SortFunc(cycles, func(a, b []Ref) int { return compareRefs(a[0], b[0]) })
	return cyclic, cycles
}

// Position is where ref is in the order; ok is false for a workload that is not a member.
func (o Order) Position(ref Ref) (int, bool) {
	p, ok := o.index[ref]
	return p, ok
}

// OnCycle returns the cycle ref is on, if any.
func (o Order) OnCycle(ref Ref) ([]Ref, bool) {
	for _, c := range o.Cycles {
		if slices.Contains(c, ref) {
			return c, true
		}
	}
	return nil, false
}

// State is where a member stands with the source's current content.
type State int

// The states of a member.
const (
	// Done: it has applied the content (its record says so) and its rollout completed, or it
	// has no rollout to wait for.
	Done State = iota
	// Pending: it has not applied the content yet.
	Pending
	// Rolling: it applied the content; its rollout is under way (or paused).
	Rolling
	// Stalled: it applied the content and its rollout stalled.
	Stalled
)

// Status is a member's state and, for people, why.
type Status struct {
	State State
	Why   string
}

// Verdict is the gate's answer for one workload and one source.
type Verdict struct {
	// Reason is "" when the workload may roll, HoldWave when it waits for Blocker, HoldHalted
	// when Blocker stalled.
	Reason  string
	Blocker Ref
	// Wave is the workload's wave (0-based) of Waves; Why says what Blocker is doing.
	Wave, Waves int
	Why         string
}

// Gate decides whether the member at ref may roll on the source's current content: every
// member in an earlier wave, and every member it rolls after, must be Done. A Stalled one
// halts it, unless resumed (an operator's resume for this content), when it counts as Done.
// status is asked lazily, in roll order: for waves, the scan ends with the wave of the
// first member not Done (a stalled one in that wave still halts), so a gate that waits for
// the canary reads the canary alone. A non-member is never held.
func (o Order) Gate(ref Ref, resumed bool, status func(Ref) Status) Verdict {
	p, ok := o.index[ref]
	if !ok {
		return Verdict{}
	}
	v := Verdict{Wave: o.Wave[p], Waves: o.Waves}
	var waiting *Verdict
	// check reads the member at q: halt when it stalled; notDone when it is not Done.
	check := func(q int) (halt, notDone bool) {
		m := o.Members[q].Ref
		s := status(m)
		switch {
		case s.State == Done, s.State == Stalled && resumed:
			return false, false
		case s.State == Stalled:
			v.Reason, v.Blocker, v.Why = HoldHalted, m, s.Why
			return true, true
		}
		if waiting == nil {
			w := v
			w.Reason, w.Blocker, w.Why = HoldWave, m, s.Why
			waiting = &w
		}
		return false, true
	}
	// The after edges first: they are few, and a stalled one halts.
	for _, q := range o.after[p] {
		if halt, _ := check(q); halt {
			return v
		}
	}
	stopWave := -1
	for q := 0; q < p && o.Wave[q] < v.Wave; q++ {
		if stopWave >= 0 && o.Wave[q] > stopWave {
			break
		}
		halt, notDone := check(q)
		if halt {
			return v
		}
		if notDone && stopWave < 0 {
			stopWave = o.Wave[q]
		}
	}
	if waiting != nil {
		return *waiting
	}
	return v
}

// Message says, for Events and explain, what a verdict of source (e.g. "configmap/shared"
// in namespace ns) holds, at content (a short form of its hash).
func (v Verdict) Message(source, ns, content string) string {
	switch v.Reason {
	case HoldWave:
		return fmt.Sprintf("wave %d of %d of %s (content %s) waits for %s: %s", v.Wave+1, v.Waves, source, content, v.Blocker, v.Why)
	case HoldHalted:
		return fmt.Sprintf("waves of %s halted at content %s: %s stalled (%s); a newer content restarts from the canary, or: kubectl reloader resume|abort %s -n %s",
			source, content, v.Blocker, v.Why, source, ns)
	}
	return ""
}

// Short is the short form of a content hash shown to people and accepted by Matches: the
// first 12 hex digits after any key ID.
func Short(hash string) string {
	if _, hex, ok := strings.Cut(hash, ":"); ok {
		hash = hex
	}
	return hash[:min(len(hash), 12)]
}

// Matches reports whether the value v of a resume or abort annotation names content hash:
// the hash itself, or its short form (at least 12 hex digits of it).
func Matches(v, hash string) bool {
	v = strings.TrimSpace(v)
	if v == "" || hash == "" {
		return false
	}
	if v == hash {
		return true
	}
	_, hex, ok := strings.Cut(hash, ":")
	if !ok {
		hex = hash
	}
	return len(v) >= 12 && strings.HasPrefix(hex, v)
}
