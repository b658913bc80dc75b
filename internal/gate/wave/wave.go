// Package wave is health-gated waves as a gate (internal/waves decides). A due change of a
// source in waves (annotated, set by a ReloaderConfig, or concerning at least
// --waves-min-workloads workloads), or of a workload that names others in reloader.dev/after,
// is held until the workloads before it have applied the source's content and completed their
// rollouts; a stalled one halts the rest. An operator's abort settles the content without a
// roll (Verdict.Settled); a resume lets the rest go past a stalled member.
//
// Where the state lives: nowhere but on the objects. The members of a source's waves are the
// workloads the source concerns, found as a source event finds them (Cluster.Affected); a
// member has applied the content when its record says so (Cluster.Applied: written in the
// same patch as its roll), and its rollout is read from its status. The order is computed
// from the members' kinds, names and annotations. So every replica, and a restarted one,
// decides the same, and a member that rolled is never rolled again for the same content: its
// record says it is done. An operator's resume or abort is an annotation on the source naming
// the content it applies to.
//
// What the gate keeps is a hint and a cache: the held targets to wake when a blocker's rollout
// ends (lost on a restart, which polling recovers from), members recently found, members read
// whole; and which halted sources were alerted on.
package wave

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reloader-operator/reloader/internal/alert"
	"github.com/reloader-operator/reloader/internal/gate"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/termsafe"
	"github.com/reloader-operator/reloader/internal/waves"
	"github.com/reloader-operator/reloader/internal/workload"
)

// Name is the gate's name in holds, metrics and explain.
const Name = "wave"

// Event reasons of the waves.
const (
	ReasonWavesHalted  = "WavesHalted"
	ReasonWavesCycle   = "WavesCycle"
	ReasonWavesAborted = "WavesAborted"
	// ReasonInvalidAnnotation is the reconciler's reason for annotations it could not read.
	ReasonInvalidAnnotation = "InvalidAnnotation"
)

// How soon a held target looks at its wave again: nothing announces that an earlier member
// completed, so it polls the cache; a halted one only needs to notice a resume, which its
// source's event brings anyway.
const (
	Recheck       = 5 * time.Second
	HaltedRecheck = 30 * time.Second
	// PerMemberRecheck stretches the wait of a big wave: each look lists the members, and
	// the end of a rollout followed wakes the targets it blocks anyway (Ended).
	PerMemberRecheck = 100 * time.Millisecond
	MaxRecheck       = 2 * time.Minute
)

// membersRecent is how long the controller takes a source's members as found: every workload
// of a big source looks them up when its change arrives, and one lookup lists them all; a
// member's state is read afresh each time.
const membersRecent = 2 * time.Second

// maxLives bounds the members kept read whole; past it they are read again.
const maxLives = 10000

// Cluster is what the gate reads of the cluster: the members of a source's waves, and where
// each stands. It is the gate's only view of the reconcilers.
type Cluster interface {
	// Kinds are the workload kinds whose workloads may be members.
	Kinds() []workload.Kind
	// Affected are the workloads of kind in ns that a change of source id (with these
	// annotations and labels) concerns, found as a source event finds them.
	Affected(ctx context.Context, kind workload.Kind, ns string, id source.ID, annotations, labels map[string]string) []client.Object
	// Content is the content hash of source obj as the resume and abort annotations name it;
	// false for a source without content to stage (a CSI mount).
	Content(id source.ID, obj client.Object) (string, bool)
	// Applied reports whether member obj, of kind, holds source id's current content in its
	// record, as its own reconcile would find it (nothing due for id; true when it no longer
	// uses id); recorded is false when it carries no record (its first sighting records it
	// without a roll). An error: its sources can't be read.
	Applied(ctx context.Context, kind workload.Kind, obj client.Object, id source.ID) (applied, recorded bool, err error)
}

// Config is what the gate is built from.
type Config struct {
	// MinWorkloads is --waves-min-workloads: 0, only annotated sources roll in waves.
	MinWorkloads int
	// Cluster: nil, nothing is held.
	Cluster Cluster
	// Cache reads a member again, found by an earlier look; Live reads a member whose status
	// the cache dropped (workload.SlimTransform); nil: the objects read are whole (explain).
	Cache client.Reader
	Live  client.Reader
	// Halted is reloader_waves_halted (namespace, kind, name); Held is
	// reloader_reloads_held_total (reason); nil counts nothing.
	Halted *prometheus.GaugeVec
	Held   *prometheus.CounterVec
	// Now is the clock of the wake hints (the rollout follower's); nil: time.Now.
	Now func() time.Time
}

// Gate is the health-gated waves' gate, shared by every kind's reconcile: a shared source's
// members are of any kind.
type Gate struct {
	c Config

	memoMu sync.Mutex
	// memo, when set (Memoize), keeps the members of each source and their states once read.
	memo *memo
	// recent are, for the controller, the members of the sources looked up in the last
	// moments (membersFresh).
	recent map[string]recentMembers

	wakeMu sync.Mutex
	// wake are the held targets to queue again when a blocker's rollout ends, by blocker
	// ("namespace/kind/name").
	wake map[string]map[string]Target
	// ended is when each blocker's rollout last ended, for a minute: a rollout that ended
	// while a Check was reading it wakes the target at once.
	ended   map[string]time.Time
	pruned  time.Time
	queues  map[string]workqueue.TypedRateLimitingInterface[reconcile.Request]
	enqueue func(Target)

	alertMu sync.Mutex
	// alerted are the halted sources alerted on (by "ns/id"), with the content and blocker:
	// one alert per halted source, not one per target it holds.
	alerted map[string]string

	livesMu sync.Mutex
	// lives are the members read whole (Live), each with the resourceVersion the cache held
	// for it then: while the cache holds the same version, its status is the same.
	lives map[types.NamespacedName]liveRead
}

// Target is a held target to wake: its kind's name and its name.
type Target struct {
	Kind string
	types.NamespacedName
}

type member struct {
	kind workload.Kind
	// obj is the cache's own object, as the lookup found it: read, never modified.
	obj client.Object
	// stale: obj was found by an earlier look; its state is read from the cache again.
	stale bool
}

type memo struct {
	members map[source.ID]map[waves.Ref]member
	status  map[source.ID]map[waves.Ref]waves.Status
}

type recentMembers struct {
	at time.Time
	m  map[waves.Ref]member
}

type liveRead struct {
	cachedAt string
	obj      client.Object
}

// New returns the gate.
func New(c Config) *Gate {
	if c.Now == nil {
		c.Now = time.Now
	}
	return &Gate{c: c}
}

// Name implements gate.Gate.
func (g *Gate) Name() string { return Name }

// Memoize makes g read each source's members, and each member's state, once: for explain and
// plan, which decide for many targets at one moment; never for the controller, whose cache
// moves on.
func (g *Gate) Memoize() {
	g.memo = &memo{members: map[source.ID]map[waves.Ref]member{}, status: map[source.ID]map[waves.Ref]waves.Status{}}
}

// KeepStatus reports whether the cache must keep every workload's status: with waves on by the
// threshold, members' statuses are read on every Check, and a live read each time would cost
// more than the status.
func KeepStatus(minWorkloads int) bool { return minWorkloads > 0 }

// AnnotationsChanged reports whether a source's waves annotations differ between o and n: a
// resume or abort is acted on at once, not at the next look of a held target.
func AnnotationsChanged(o, n map[string]string) bool {
	for _, k := range []string{waves.Annotation, waves.ResumeAnnotation, waves.AbortAnnotation} {
		if o[k] != n[k] {
			return true
		}
	}
	return false
}

func kindRef(k string) string { return strings.ToLower(k) }

// known resolves a kind as written in an after annotation to its canonical name.
func (g *Gate) known(kind string) (string, bool) {
	for _, k := range g.c.Cluster.Kinds() {
		if slices.Contains(workload.Names(k), kind) {
			return kindRef(k.Name()), true
		}
	}
	return "", false
}

func (g *Gate) kindOf(name string) workload.Kind {
	for _, k := range g.c.Cluster.Kinds() {
		if k.Name() == name {
			return k
		}
	}
	return nil
}

// found is what a Check found for one target's due changes.
type found struct {
	hold    reload.Hold
	aborted []reload.Change
	// halted are the sources halted (with signature); unhalted, those looked at and found
	// not halted.
	halted   map[source.ID]string
	unhalted []source.ID
	cycles   []string
	invalid  []error
	// blockers are the members the held changes wait for; members is the most members of a
	// source looked at; read is when the Check began reading them.
	blockers []waves.Ref
	members  int
	read     time.Time
	content  map[source.ID]string
}

// Check holds the due changes that a wave holds, settles the aborted ones without a roll,
// and says each once: bad after references, a cycle, an abort, a halt (with an alert per
// halted source), a wait (logged). It reads the cache only, but for members whose status the
// cache dropped. When nothing is due, or a gate before it holds or notifies, it holds
// nothing and forgets its wake hint.
func (g *Gate) Check(ctx context.Context, d gate.Due) (gate.Verdict, error) {
	var v gate.Verdict
	// A target of a kind that is none of the cluster's (a ReloaderConfig's generic target) is
	// no member of any wave: reloader can't read the rollout an operator makes of it, so no
	// other member could wait for it, and it waits for none (docs/reloaderconfig.md).
	if g.c.Cluster == nil || len(d.Changes) == 0 || d.Ahead != nil || d.Notify || g.kindOf(d.Kind) == nil {
		if !d.DryRun {
			g.wakeOn(d.Key, Target{}, nil, time.Time{})
		}
		return v, nil
	}
	f := g.find(ctx, d)
	v.Hold, v.Settled = f.hold, f.aborted
	v.Notices = g.notices(d, f)
	if !d.DryRun {
		g.record(d, f)
	}
	return v, nil
}

// find decides, for d's target and its due changes, which are aborted and whether a wave
// holds the rest.
func (g *Gate) find(ctx context.Context, d gate.Due) found {
	res := found{halted: map[source.ID]string{}, content: map[source.ID]string{}, read: g.c.Now()}
	ann := d.Target.GetAnnotations()
	self := waves.Ref{Kind: kindRef(d.Kind), Name: d.Target.GetName()}
	var after []waves.Ref
	if v, ok := ann[waves.AfterAnnotation]; ok {
		after, res.invalid = waves.ParseAfter(v, g.known)
	}
	if len(d.Overrides.After) > 0 {
		// A ReloaderConfig's targets' after lists, with the annotation's bounds.
		more, invalid := waves.ParseAfter(strings.Join(d.Overrides.After, ","), g.known)
		after, res.invalid = append(after, more...), append(res.invalid, invalid...)
	}
	configured := d.Overrides.Waves != nil && *d.Overrides.Waves
	var holds []string
	for _, ch := range d.Changes {
		s := d.Sources[ch.ID]
		if s.Object == nil {
			continue // a deleted source: no content to stage
		}
		content, ok := g.c.Cluster.Content(ch.ID, s.Object)
		if !ok {
			continue // a CSI mount
		}
		res.content[ch.ID] = content
		if waves.Matches(s.Annotations[waves.AbortAnnotation], content) {
			res.aborted = append(res.aborted, ch)
			res.unhalted = append(res.unhalted, ch.ID) // aborted: no longer halted
			continue
		}
		optIn := waves.IsTrue(s.Annotations, waves.Annotation) || configured
		if !optIn && g.c.MinWorkloads == 0 && len(after) == 0 {
			continue
		}
		members := g.members(ctx, d, ch.ID, s)
		res.members = max(res.members, len(members))
		on := optIn || (g.c.MinWorkloads > 0 && len(members) >= g.c.MinWorkloads)
		if !on && len(after) == 0 {
			continue
		}
		if _, ok := members[self]; !ok {
			members[self] = member{kind: g.kindOf(d.Kind), obj: d.Target}
		}
		ms := make([]waves.Member, 0, len(members))
		for ref, m := range members {
			mm := waves.Member{Ref: ref, Canary: waves.IsTrue(m.obj.GetAnnotations(), waves.CanaryAnnotation)}
			if ref == self {
				mm.After = after
			} else if v, ok := m.obj.GetAnnotations()[waves.AfterAnnotation]; ok {
				mm.After, _ = waves.ParseAfter(v, g.known) // its own reconcile reports its errors
			}
			ms = append(ms, mm)
		}
		order := waves.Plan(ms, on)
		if c, ok := order.OnCycle(self); ok {
			res.cycles = append(res.cycles, cycleString(c))
		}
		resumed := waves.Matches(s.Annotations[waves.ResumeAnnotation], content)
		v := order.Gate(self, resumed, func(ref waves.Ref) waves.Status { return g.status(ctx, members[ref], ch.ID) })
		switch v.Reason {
		case "":
			res.unhalted = append(res.unhalted, ch.ID)
			continue
		case waves.HoldHalted:
			res.halted[ch.ID] = content + " " + v.Blocker.String()
			res.hold.Reason = waves.HoldHalted
		default:
			res.unhalted = append(res.unhalted, ch.ID)
			if res.hold.Reason == "" {
				res.hold.Reason = waves.HoldWave
			}
		}
		holds = append(holds, v.Message(ch.ID.String(), d.Target.GetNamespace(), waves.Short(content)))
		res.blockers = append(res.blockers, v.Blocker)
	}
	if res.hold.Reason != "" {
		res.hold.Why = strings.Join(holds, "; ")
		recheck := min(max(Recheck, time.Duration(res.members)*PerMemberRecheck), MaxRecheck)
		if res.hold.Reason == waves.HoldHalted {
			recheck = max(recheck, HaltedRecheck)
		}
		res.hold.Until = d.Now.Add(recheck)
	}
	return res
}

func cycleString(c []waves.Ref) string {
	parts := make([]string, 0, len(c)+1)
	for _, r := range c {
		parts = append(parts, r.String())
	}
	return strings.Join(append(parts, parts[0]), " -> ")
}

// notices are what f has to say, each once per target while it lasts.
func (g *Gate) notices(d gate.Due, f found) []gate.Notice {
	var out []gate.Notice
	kind, name := d.Kind, d.Target.GetName()
	if len(f.invalid) > 0 {
		out = append(out, gate.Notice{Warning: true, Reason: ReasonInvalidAnnotation, Action: "Validate",
			Message: errors.Join(f.invalid...).Error(), Once: fmt.Sprint(f.invalid)})
	}
	// One notice of each reason (the reporter says each reason's once): the cycles together,
	// the aborted sources together.
	if cycles := slices.Compact(slices.Sorted(slices.Values(f.cycles))); len(cycles) > 0 {
		c := strings.Join(cycles, "; ")
		out = append(out, gate.Notice{Warning: true, Reason: ReasonWavesCycle, Action: "Order", Once: c,
			Message: termsafe.ClipNote(fmt.Sprintf("Annotation %s makes a cycle: %s; %s %s rolls as if without it", waves.AfterAnnotation, c, kind, name))})
	}
	if len(f.aborted) > 0 {
		var what, sig []string
		for _, ch := range f.aborted {
			content := waves.Short(f.content[ch.ID])
			what = append(what, fmt.Sprintf("%s at content %s", ch.ID, content))
			sig = append(sig, ch.ID.String()+" "+content)
		}
		out = append(out, gate.Notice{Reason: ReasonWavesAborted, Action: "Abort", Once: strings.Join(sig, ", "),
			Message: termsafe.ClipNote(fmt.Sprintf("Waves of %s aborted (annotation %s): %s %s keeps its pods; the content is recorded as seen, and a newer one rolls",
				strings.Join(what, ", "), waves.AbortAnnotation, kind, name))})
	}
	h := f.hold
	if h.Reason == "" {
		return out
	}
	sig := h.Reason
	for _, id := range slices.SortedFunc(maps.Keys(f.halted), func(a, b source.ID) int { return strings.Compare(a.String(), b.String()) }) {
		sig += "|" + f.halted[id]
	}
	if h.Reason == waves.HoldWave {
		sig += "|" + h.Why[:strings.Index(h.Why+":", ":")] // the wave and whom it waits for
	}
	n := gate.Notice{Reason: h.Reason, Once: sig}
	if g.c.Held != nil {
		n.Count = []prometheus.Counter{g.c.Held.WithLabelValues(h.Reason)}
	}
	if h.Reason == waves.HoldWave {
		n.Quiet, n.Message = true, "reload held: waiting for its wave: "+h.Why
		return append(out, n)
	}
	n.Warning, n.Reason, n.Action = true, ReasonWavesHalted, "Hold"
	n.Message = termsafe.ClipNote(fmt.Sprintf("Reload of %s %s after change of %s halted: %s", kind, name, alert.Describe(alert.SourcesOf(d.Changes)), h.Why))
	if !d.DryRun && g.firstAlert(d, f) {
		n.Alert = &alert.Reload{Kind: kind, Namespace: d.Target.GetNamespace(), Name: name, Sources: alert.SourcesOf(d.Changes),
			Time: d.Now, Held: h.Why, HeldBy: waves.HoldHalted}
	}
	return append(out, n)
}

// firstAlert reports whether one of f's halted sources (at its content and blocker) was not
// alerted on yet, and marks them: the first target held names it; the Events name every one.
func (g *Gate) firstAlert(d gate.Due, f found) bool {
	g.alertMu.Lock()
	defer g.alertMu.Unlock()
	if g.alerted == nil {
		g.alerted = map[string]string{}
	}
	first := false
	for id, sig := range f.halted {
		k := sourceKey(d.Target.GetNamespace(), id)
		if g.alerted[k] != sig {
			g.alerted[k], first = sig, true
		}
	}
	return first
}

func sourceKey(ns string, id source.ID) string { return ns + "/" + id.String() }

// record keeps what the controller's Check found: the halted gauge of each source looked at,
// the alerts of the sources no longer halted, and the wake hint of the target.
func (g *Gate) record(d gate.Due, f found) {
	ns := d.Target.GetNamespace()
	g.alertMu.Lock()
	for _, id := range f.unhalted {
		if g.c.Halted != nil {
			g.c.Halted.DeleteLabelValues(ns, string(id.Kind), id.Name)
		}
		delete(g.alerted, sourceKey(ns, id))
	}
	g.alertMu.Unlock()
	for id := range f.halted {
		if g.c.Halted != nil {
			g.c.Halted.WithLabelValues(ns, string(id.Kind), id.Name).Set(1)
		}
	}
	g.wakeOn(d.Key, Target{Kind: d.Kind, NamespacedName: client.ObjectKeyFromObject(d.Target)}, f.blockers, f.read)
}

// Forget drops the wake hint of the target named key (gone, or not selected).
func (g *Gate) Forget(key string) { g.wakeOn(key, Target{}, nil, time.Time{}) }

// members are the workloads of every kind in d's namespace that a change of source id
// concerns: for explain, once per explanation (Memoize); for the controller, once per
// moment (membersFresh).
func (g *Gate) members(ctx context.Context, d gate.Due, id source.ID, s gate.Source) map[waves.Ref]member {
	ns := d.Target.GetNamespace()
	if g.memo == nil {
		return g.membersFresh(ctx, d, id, s)
	}
	g.memoMu.Lock()
	m, ok := g.memo.members[id]
	g.memoMu.Unlock()
	if !ok {
		m = g.lookup(ctx, ns, id, s)
		g.memoMu.Lock()
		g.memo.members[id] = m
		g.memoMu.Unlock()
	}
	return maps.Clone(m)
}

// lookup finds the members of source id in ns through every kind.
func (g *Gate) lookup(ctx context.Context, ns string, id source.ID, s gate.Source) map[waves.Ref]member {
	out := map[waves.Ref]member{}
	var labels map[string]string
	if s.Object != nil {
		labels = s.Object.GetLabels()
	}
	for _, k := range g.c.Cluster.Kinds() {
		for _, o := range g.c.Cluster.Affected(ctx, k, ns, id, s.Annotations, labels) {
			out[waves.Ref{Kind: kindRef(k.Name()), Name: o.GetName()}] = member{kind: k, obj: o}
		}
	}
	return out
}

// membersFresh are the members of source id, found by a lookup made in the last
// membersRecent for the same version of the source, else now.
func (g *Gate) membersFresh(ctx context.Context, d gate.Due, id source.ID, s gate.Source) map[waves.Ref]member {
	ns := d.Target.GetNamespace()
	key, now := ns+"/"+id.String(), g.c.Now()
	if s.Object != nil {
		key += "@" + s.Object.GetResourceVersion()
	}
	g.memoMu.Lock()
	r, ok := g.recent[key]
	g.memoMu.Unlock()
	if ok && now.Sub(r.at) < membersRecent {
		out := make(map[waves.Ref]member, len(r.m))
		for ref, m := range r.m {
			m.stale = true
			out[ref] = m
		}
		return out
	}
	out := g.lookup(ctx, ns, id, s)
	if d.DryRun {
		return out
	}
	g.memoMu.Lock()
	defer g.memoMu.Unlock()
	if g.recent == nil {
		g.recent = map[string]recentMembers{}
	}
	for k, r := range g.recent {
		if now.Sub(r.at) >= membersRecent {
			delete(g.recent, k) // bounded by the sources changed in the last moments
		}
	}
	g.recent[key] = recentMembers{at: now, m: maps.Clone(out)}
	return out
}

// status is where member m stands with source id's current content: Pending until its record
// holds the content, then its rollout as its status tells. A member without record is Done:
// its first sighting records it without a roll.
func (g *Gate) status(ctx context.Context, m member, id source.ID) waves.Status {
	if g.memo == nil || m.obj == nil || m.kind == nil {
		return g.readStatus(ctx, m, id)
	}
	ref := waves.Ref{Kind: kindRef(m.kind.Name()), Name: m.obj.GetName()}
	g.memoMu.Lock()
	st, ok := g.memo.status[id][ref]
	g.memoMu.Unlock()
	if ok {
		return st
	}
	st = g.readStatus(ctx, m, id)
	g.memoMu.Lock()
	if g.memo.status[id] == nil {
		g.memo.status[id] = map[waves.Ref]waves.Status{}
	}
	g.memo.status[id][ref] = st
	g.memoMu.Unlock()
	return st
}

// readStatus is status, read.
func (g *Gate) readStatus(ctx context.Context, m member, id source.ID) waves.Status {
	if m.kind == nil || m.obj == nil {
		return waves.Status{State: waves.Done}
	}
	e := m.obj
	if m.stale && g.c.Cache != nil {
		fresh := m.kind.NewObject()
		if err := g.c.Cache.Get(ctx, client.ObjectKeyFromObject(e), fresh); err != nil {
			if apierrors.IsNotFound(err) {
				return waves.Status{State: waves.Done} // gone: nothing to wait for
			}
			return waves.Status{State: waves.Pending, Why: "it can't be read: " + err.Error()}
		}
		e = fresh
	}
	applied, recorded, err := g.c.Cluster.Applied(ctx, m.kind, e, id)
	switch {
	case !recorded:
		return waves.Status{State: waves.Done}
	case err != nil:
		return waves.Status{State: waves.Pending, Why: "its sources can't be read: " + err.Error()}
	case !applied:
		return waves.Status{State: waves.Pending, Why: "it has not rolled on it yet"}
	}
	pk, ok := m.kind.(workload.Progressing)
	if !ok {
		return waves.Status{State: waves.Done}
	}
	if workload.StatusDropped(e) && g.c.Live != nil {
		fresh, err := g.readLive(ctx, m.kind, e)
		if err != nil {
			return waves.Status{State: waves.Pending, Why: "its status can't be read: " + err.Error()}
		}
		e = fresh
	}
	p := pk.Progress(e, e.GetGeneration())
	switch p.State {
	case workload.RolloutComplete, workload.RolloutUntracked:
		return waves.Status{State: waves.Done}
	case workload.RolloutStalled:
		return waves.Status{State: waves.Stalled, Why: p.Why}
	}
	return waves.Status{State: waves.Rolling, Why: "its rollout is not complete: " + p.Why}
}

// readLive reads cached whole, from the API server, unless it was read while the cache held
// the version it holds now (lives).
func (g *Gate) readLive(ctx context.Context, kind workload.Kind, cached client.Object) (client.Object, error) {
	key, rv := client.ObjectKeyFromObject(cached), cached.GetResourceVersion()
	g.livesMu.Lock()
	if l, ok := g.lives[key]; ok && l.cachedAt == rv {
		g.livesMu.Unlock()
		return l.obj, nil
	}
	g.livesMu.Unlock()
	fresh := kind.NewObject()
	if err := g.c.Live.Get(ctx, key, fresh); err != nil {
		return nil, err
	}
	g.livesMu.Lock()
	defer g.livesMu.Unlock()
	if g.lives == nil || len(g.lives) >= maxLives {
		g.lives = map[types.NamespacedName]liveRead{}
	}
	g.lives[key] = liveRead{cachedAt: rv, obj: fresh}
	return fresh, nil
}
