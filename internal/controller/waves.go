package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	crsource "sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/reloader-operator/reloader/internal/alert"
	"github.com/reloader-operator/reloader/internal/controller/rollout"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/termsafe"
	"github.com/reloader-operator/reloader/internal/waves"
	"github.com/reloader-operator/reloader/internal/workload"
)

// Health-gated waves in the reconcile (internal/waves decides). Where a reload is decided, a
// due change of a source in waves (annotated, or concerning at least --waves-min-workloads
// workloads), or of a workload that names others in reloader.dev/after, is held until the
// workloads before it have applied the source's content and completed their rollouts; a
// stalled one halts the rest.
//
// Where the state lives: nowhere but on the objects. The members of a source's waves are the
// workloads the source concerns, found through the index as a source event finds them; a
// member has applied the content when its record says so (written in the same patch as its
// roll), and its rollout is read from its status. The order is computed from the members'
// kinds, names and annotations. So every replica, and a restarted one, decides the same, and
// a member that rolled is never rolled again for the same content: its record says it is
// done. An operator's resume or abort is an annotation on the source naming the content it
// applies to.

// Event reasons of the waves.
const (
	ReasonWavesHalted  = "WavesHalted"
	ReasonWavesCycle   = "WavesCycle"
	ReasonWavesAborted = "WavesAborted"
)

// How soon a held workload looks at its wave again: nothing announces that an earlier
// member completed, so it polls the cache; a halted one only needs to notice a resume,
// which its source's event brings anyway.
const (
	waveRecheck   = 5 * time.Second
	haltedRecheck = 30 * time.Second
	// perMemberRecheck stretches the wait of a big wave: each look lists the members, and
	// the end of a rollout followed wakes the workloads it blocks anyway (RolloutEnded).
	perMemberRecheck = 100 * time.Millisecond
	maxRecheck       = 2 * time.Minute
)

// Waves is what the reconcilers of one manager share for health-gated waves: the threshold,
// the reconciler of each kind (a source's members are of any kind) and the reader of a status
// the cache dropped. A nil *Waves holds nothing.
type Waves struct {
	// MinWorkloads is --waves-min-workloads: 0, only annotated sources roll in waves.
	MinWorkloads int
	// Live reads a member whose status the cache dropped (workload.SlimTransform); nil: the
	// reconcilers' clients read whole objects (explain).
	Live    client.Reader
	Metrics *metrics.Metrics

	byKind []*WorkloadReconciler
	notes  waveNotes
	// memo, when set (Memoize), keeps the members of each source and their states once read:
	// for one explain or plan, which decides for many workloads from one view of the cluster.
	memoMu sync.Mutex
	memo   *waveMemo
	// recent are, for the controller, the members of the sources looked up in the last
	// moments (membersFresh).
	recent map[string]recentMembers
	// wake are the held workloads to queue again when a blocker's rollout ends, by blocker
	// ("namespace/kind/name"): a hint that saves polling, lost on a restart, which only
	// polling recovers from (waveRecheck).
	wakeMu sync.Mutex
	wake   map[string]map[string]wakeTarget
	// ended is when each blocker's rollout last ended, for a minute: a rollout that ended
	// while a gate was reading it wakes the workload at once (wakeOn).
	ended  map[string]time.Time
	pruned time.Time
	queues map[string]workqueue.TypedRateLimitingInterface[reconcile.Request]
	// lives are the members read whole (Live), each with the resourceVersion the cache held
	// for it then: while the cache holds the same version, its status is the same, and no
	// request is needed (every held workload of a big wave reads the same blockers).
	livesMu sync.Mutex
	lives   map[types.NamespacedName]liveRead
}

// liveRead is a member read whole, and the resourceVersion the cache held when it was read.
type liveRead struct {
	cachedAt string
	obj      client.Object
}

// maxLives bounds the members kept read whole; past it they are read again.
const maxLives = 10000

// wakeTarget is a held workload: its kind's name and its name.
type wakeTarget struct {
	kind string
	nn   types.NamespacedName
}

// NewWaves returns the waves of one manager; add its reconcilers with Add.
func NewWaves(minWorkloads int, live client.Reader, m *metrics.Metrics) *Waves {
	return &Waves{MinWorkloads: minWorkloads, Live: live, Metrics: m}
}

// Add makes r one of the reconcilers whose workloads are members, and r's waves these.
func (ws *Waves) Add(r *WorkloadReconciler) {
	ws.byKind = append(ws.byKind, r)
	slices.SortFunc(ws.byKind, func(a, b *WorkloadReconciler) int { return strings.Compare(a.Kind.Name(), b.Kind.Name()) })
	r.Waves = ws
}

// waveMemo is what Memoize keeps.
type waveMemo struct {
	members map[source.ID]map[waves.Ref]waveMember
	status  map[source.ID]map[waves.Ref]waves.Status
}

// Memoize makes ws read each source's members, and each member's state, once: for explain
// and plan, which decide for many workloads at one moment; never for the controller, whose
// cache moves on.
func (ws *Waves) Memoize() {
	ws.memo = &waveMemo{members: map[source.ID]map[waves.Ref]waveMember{}, status: map[source.ID]map[waves.Ref]waves.Status{}}
}

// KeepStatus reports whether the cache must keep every workload's status: with waves on by
// the threshold, members' statuses are read on every gate, and a live read each time would
// cost more than the status.
func KeepStatus(minWorkloads int) bool { return minWorkloads > 0 }

func kindRef(k workload.Kind) string { return strings.ToLower(k.Name()) }

// known resolves a kind as written in an after annotation to its canonical name.
func (ws *Waves) known(kind string) (string, bool) {
	for _, r := range ws.byKind {
		if slices.Contains(workload.Names(r.Kind), kind) {
			return kindRef(r.Kind), true
		}
	}
	return "", false
}

// wavesChanged reports whether a source's waves annotations differ between o and n: a resume
// or abort is acted on at once, not at the next look of a held workload.
func wavesChanged(o, n map[string]string) bool {
	for _, k := range []string{waves.Annotation, waves.ResumeAnnotation, waves.AbortAnnotation} {
		if o[k] != n[k] {
			return true
		}
	}
	return false
}

// waveMember is a member found, with the reconciler of its kind. stale: obj was found by an
// earlier look (membersFresh); its state is read from the cache again.
type waveMember struct {
	r     *WorkloadReconciler
	obj   client.Object
	stale bool
}

// waveResult is what the gate found for one workload's due changes.
type waveResult struct {
	hold reload.Hold
	// aborted are due changes whose content an operator aborted: recorded, not rolled.
	aborted []reload.Change
	// halted are the sources halted (with signature, for announcing once); unhalted, those
	// looked at and found not halted.
	halted   map[source.ID]string
	unhalted []source.ID
	cycles   []string
	invalid  []error
	// blockers are the members the held changes wait for, to wake the workload when their
	// rollout ends; members is the most members of a source looked at.
	blockers []waves.Ref
	members  int
	// read is when the gate began reading the members.
	read time.Time
	// content is each source's content hash, as the resume and abort annotations name it.
	content map[source.ID]string
}

// gate decides, for workload obj of r's kind and its due changes, which are aborted and
// whether a wave holds the rest. It reads the cache only.
func (ws *Waves) gate(ctx context.Context, r *WorkloadReconciler, obj client.Object, w seen, due []reload.Change, now time.Time) waveResult {
	res := waveResult{halted: map[source.ID]string{}, content: map[source.ID]string{}, read: time.Now()}
	if ws == nil {
		return res
	}
	self := waves.Ref{Kind: kindRef(r.Kind), Name: obj.GetName()}
	var after []waves.Ref
	if v, ok := obj.GetAnnotations()[waves.AfterAnnotation]; ok {
		after, res.invalid = waves.ParseAfter(v, ws.known)
	}
	if len(w.settings.after) > 0 {
		// A ReloaderConfig's targets' after lists, with the annotation's bounds.
		more, invalid := waves.ParseAfter(strings.Join(w.settings.after, ","), ws.known)
		after, res.invalid = append(after, more...), append(res.invalid, invalid...)
	}
	var holds []string
	for _, ch := range due {
		o := w.sources[ch.ID]
		st, ok := r.lookup().SourceType(ch.ID.Kind)
		if o.obj == nil || !ok || st.Pool != nil {
			continue // a deleted source, or a CSI mount: no content to stage
		}
		ann := o.annotations
		content := st.contentHash(o.obj)
		res.content[ch.ID] = content
		if waves.Matches(ann[waves.AbortAnnotation], content) {
			res.aborted = append(res.aborted, ch)
			res.unhalted = append(res.unhalted, ch.ID) // aborted: no longer halted
			continue
		}
		optIn := waves.IsTrue(ann, waves.Annotation) || w.settings.waves
		if !optIn && ws.MinWorkloads == 0 && len(after) == 0 {
			continue
		}
		members := ws.members(ctx, obj.GetNamespace(), ch.ID, o.snapshot)
		res.members = max(res.members, len(members))
		on := optIn || (ws.MinWorkloads > 0 && len(members) >= ws.MinWorkloads)
		if !on && len(after) == 0 {
			continue
		}
		if _, ok := members[self]; !ok {
			members[self] = waveMember{r: r, obj: obj}
		}
		ms := make([]waves.Member, 0, len(members))
		for ref, m := range members {
			mm := waves.Member{Ref: ref, Canary: waves.IsTrue(m.obj.GetAnnotations(), waves.CanaryAnnotation)}
			if ref == self {
				mm.After = after
			} else if v, ok := m.obj.GetAnnotations()[waves.AfterAnnotation]; ok {
				mm.After, _ = waves.ParseAfter(v, ws.known) // its own reconcile reports its errors
			}
			ms = append(ms, mm)
		}
		order := waves.Plan(ms, on)
		if c, ok := order.OnCycle(self); ok {
			res.cycles = append(res.cycles, cycleString(c))
		}
		resumed := waves.Matches(ann[waves.ResumeAnnotation], content)
		v := order.Gate(self, resumed, func(ref waves.Ref) waves.Status { return ws.status(ctx, members[ref], ch.ID) })
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
		holds = append(holds, v.Message(ch.ID.String(), obj.GetNamespace(), waves.Short(content)))
		res.blockers = append(res.blockers, v.Blocker)
	}
	if res.hold.Reason != "" {
		res.hold.Why = strings.Join(holds, "; ")
		recheck := min(max(waveRecheck, time.Duration(res.members)*perMemberRecheck), maxRecheck)
		if res.hold.Reason == waves.HoldHalted {
			recheck = max(recheck, haltedRecheck)
		}
		res.hold.Until = now.Add(recheck)
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

// members are the workloads of every kind in ns that a change of source id concerns, found
// as a source event finds them: for explain, once per explanation (Memoize); for the
// controller, once per moment (membersFresh).
func (ws *Waves) members(ctx context.Context, ns string, id source.ID, s snapshot) map[waves.Ref]waveMember {
	if ws.memo == nil {
		return ws.membersFresh(ctx, ns, id, s)
	}
	ws.memoMu.Lock()
	m, ok := ws.memo.members[id]
	ws.memoMu.Unlock()
	if !ok {
		m = ws.lookupMembers(ctx, ns, id, s)
		ws.memoMu.Lock()
		ws.memo.members[id] = m
		ws.memoMu.Unlock()
	}
	return maps.Clone(m)
}

// lookupMembers finds the members of source id in ns through the index of every kind.
func (ws *Waves) lookupMembers(ctx context.Context, ns string, id source.ID, s snapshot) map[waves.Ref]waveMember {
	out := map[waves.Ref]waveMember{}
	for _, rk := range ws.byKind {
		for _, o := range rk.lookup().Affected(ctx, rk.Kind, ns, id, s.annotations, s.labels) {
			out[waves.Ref{Kind: kindRef(rk.Kind), Name: o.GetName()}] = waveMember{r: rk, obj: o}
		}
	}
	return out
}

// membersRecent is how long the controller takes a source's members as found: every workload
// of a big source looks them up when its change arrives, and one lookup lists them all; a
// member's state is read afresh each time (waveMember.stale).
const membersRecent = 2 * time.Second

// recentMembers are a source's members as found at a time.
type recentMembers struct {
	at time.Time
	m  map[waves.Ref]waveMember
}

// membersFresh are the members of source id, found by a lookup made in the last
// membersRecent for the same version of the source, else now.
func (ws *Waves) membersFresh(ctx context.Context, ns string, id source.ID, s snapshot) map[waves.Ref]waveMember {
	key, now := ns+"/"+id.String(), time.Now()
	if s.obj != nil {
		key += "@" + s.obj.GetResourceVersion()
	}
	ws.memoMu.Lock()
	r, ok := ws.recent[key]
	ws.memoMu.Unlock()
	if ok && now.Sub(r.at) < membersRecent {
		out := make(map[waves.Ref]waveMember, len(r.m))
		for ref, m := range r.m {
			m.stale = true
			out[ref] = m
		}
		return out
	}
	out := ws.lookupMembers(ctx, ns, id, s)
	ws.memoMu.Lock()
	defer ws.memoMu.Unlock()
	if ws.recent == nil {
		ws.recent = map[string]recentMembers{}
	}
	for k, r := range ws.recent {
		if now.Sub(r.at) >= membersRecent {
			delete(ws.recent, k) // bounded by the sources changed in the last moments
		}
	}
	ws.recent[key] = recentMembers{at: now, m: maps.Clone(out)}
	return out
}

// status is where member m stands with source id's current content: Pending until its record
// holds the content (as its own reconcile would find: nothing due for id), then its rollout
// as its status tells. A member without record is Done: its first sighting records it
// without a roll.
func (ws *Waves) status(ctx context.Context, m waveMember, id source.ID) waves.Status {
	if ws.memo == nil || m.obj == nil {
		return ws.readStatus(ctx, m, id)
	}
	ref := waves.Ref{Kind: kindRef(m.r.Kind), Name: m.obj.GetName()}
	ws.memoMu.Lock()
	st, ok := ws.memo.status[id][ref]
	ws.memoMu.Unlock()
	if ok {
		return st
	}
	st = ws.readStatus(ctx, m, id)
	ws.memoMu.Lock()
	if ws.memo.status[id] == nil {
		ws.memo.status[id] = map[waves.Ref]waves.Status{}
	}
	ws.memo.status[id][ref] = st
	ws.memoMu.Unlock()
	return st
}

// readStatus is status, read.
func (ws *Waves) readStatus(ctx context.Context, m waveMember, id source.ID) waves.Status {
	if m.r == nil || m.obj == nil {
		return waves.Status{State: waves.Done}
	}
	e := m.obj
	if m.stale {
		fresh := m.r.Kind.NewObject()
		if err := m.r.Client.Get(ctx, client.ObjectKeyFromObject(e), fresh); err != nil {
			if apierrors.IsNotFound(err) {
				return waves.Status{State: waves.Done} // gone: nothing to wait for
			}
			return waves.Status{State: waves.Pending, Why: "it can't be read: " + err.Error()}
		}
		e = fresh
	}
	rec, has := m.r.record(ctx, e)
	if !has {
		return waves.Status{State: waves.Done}
	}
	w, err := m.r.observe(ctx, e, nil)
	if err != nil {
		return waves.Status{State: waves.Pending, Why: "its sources can't be read: " + err.Error()}
	}
	o, ok := w.sources[id]
	if !ok {
		return waves.Status{State: waves.Done}
	}
	if changed, _ := reload.Diff(rebase(rec, w.sources), true, map[source.ID]string{id: o.hash}, m.r.Behaviour.Events); len(changed) > 0 {
		return waves.Status{State: waves.Pending, Why: "it has not rolled on it yet"}
	}
	pk, ok := m.r.Kind.(workload.Progressing)
	if !ok {
		return waves.Status{State: waves.Done}
	}
	if workload.StatusDropped(e) && ws.Live != nil {
		fresh, err := ws.readLive(ctx, m.r.Kind, e)
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

// announceWave reports what the gate found, each thing once per workload and content: bad
// after references, a cycle, an abort, a halt (Warning Event, log line, alert, the held
// counter and reloader_waves_halted); a wait is logged once and counted as waiting.
func (r *WorkloadReconciler) announceWave(ctx context.Context, obj client.Object, k string, res waveResult, due []reload.Change, related runtime.Object) {
	ws, logger := r.Waves, log.FromContext(ctx)
	if len(res.invalid) > 0 && ws.notes.first(k, "invalid", fmt.Sprint(res.invalid)) {
		r.invalid(ctx, obj, res.invalid...)
	}
	for _, c := range res.cycles {
		if ws.notes.first(k, "cycle", c) {
			logger.Info("reloader.dev/after cycle refused; rolling as if without after", "cycle", c)
			r.Recorder.Eventf(obj, related, corev1.EventTypeWarning, ReasonWavesCycle, "Order",
				"%s", termsafe.ClipNote(fmt.Sprintf("Annotation %s makes a cycle: %s; %s %s rolls as if without it", waves.AfterAnnotation, c, r.Kind.Name(), obj.GetName())))
		}
	}
	for _, ch := range res.aborted {
		content := waves.Short(res.content[ch.ID])
		if ws.notes.first(k, "abort "+ch.ID.String(), content) {
			logger.Info("waves aborted: content recorded without a roll", "source", ch.ID.String(), "content", content)
			r.Recorder.Eventf(obj, related, corev1.EventTypeNormal, ReasonWavesAborted, "Abort",
				"Waves of %s at content %s aborted (annotation %s): %s %s keeps its pods; the content is recorded as seen, and a newer one rolls",
				ch.ID, content, waves.AbortAnnotation, r.Kind.Name(), obj.GetName())
		}
	}
	m := ws.Metrics
	for _, id := range res.unhalted {
		m.WavesHalted.DeleteLabelValues(obj.GetNamespace(), string(id.Kind), id.Name)
		ws.notes.forget(sourceNote(obj.GetNamespace(), id), "alert")
	}
	for id := range res.halted {
		m.WavesHalted.WithLabelValues(obj.GetNamespace(), string(id.Kind), id.Name).Set(1)
	}
	h := res.hold
	ws.wakeOn(k, wakeTarget{kind: r.Kind.Name(), nn: client.ObjectKeyFromObject(obj)}, res.blockers, res.read)
	if h.Reason == "" {
		ws.notes.forget(k, "hold")
		return
	}
	r.Pacer.Forget(k, r.Now()) // a slot it reserved goes back; it takes one when its wave comes
	sig := h.Reason
	for _, s := range res.halted {
		sig += "|" + s
	}
	if h.Reason == waves.HoldWave {
		sig += "|" + h.Why[:strings.Index(h.Why+":", ":")] // the wave and whom it waits for
	}
	if !ws.notes.first(k, "hold", sig) {
		logger.V(1).Info("reload held", "reason", h.Reason, "why", h.Why)
		return
	}
	r.Metrics.Held.WithLabelValues(h.Reason).Inc()
	if h.Reason == waves.HoldWave {
		logger.Info("reload held: waiting for its wave", "why", h.Why)
		return
	}
	note := fmt.Sprintf("Reload of %s %s after change of %s halted: %s", r.Kind.Name(), obj.GetName(), describe(due), h.Why)
	logger.Info("reload held: waves halted", "why", h.Why)
	r.Recorder.Eventf(obj, related, corev1.EventTypeWarning, ReasonWavesHalted, "Hold", "%s", termsafe.ClipNote(note))
	// One alert per halted source and content, not one per workload it holds: the first
	// workload held names it; the Events name every one.
	alerted := false
	for id, sig := range res.halted {
		alerted = ws.notes.first(sourceNote(obj.GetNamespace(), id), "alert", sig) || alerted
	}
	if alerted {
		r.Alerts.Queue(alert.Reload{Kind: r.Kind.Name(), Namespace: obj.GetNamespace(), Name: obj.GetName(), Sources: alert.SourcesOf(due), Time: r.Now(), Held: h.Why, HeldBy: waves.HoldHalted})
	}
}

// sourceNote names a source among the notes (which otherwise name workloads).
func sourceNote(ns string, id source.ID) string { return "source " + ns + "/" + id.String() }

// waveNotes remembers, per workload and topic, what was last announced, so that a requeued
// hold is announced once. Bounded by the workloads held: a workload's notes go with it.
type waveNotes struct {
	mu sync.Mutex
	m  map[string]map[string]string
}

func (n *waveNotes) first(k, topic, sig string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil {
		n.m = map[string]map[string]string{}
	}
	if n.m[k] == nil {
		n.m[k] = map[string]string{}
	}
	if had, ok := n.m[k][topic]; ok && had == sig {
		return false
	}
	n.m[k][topic] = sig
	return true
}

func (n *waveNotes) forget(k, topic string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m[k] != nil {
		delete(n.m[k], topic)
		if len(n.m[k]) == 0 {
			delete(n.m, k)
		}
	}
}

// forgetWaves drops what the waves remember of workload k (gone, or not selected).
func (ws *Waves) forgetWaves(k string) {
	if ws == nil {
		return
	}
	ws.notes.mu.Lock()
	delete(ws.notes.m, k)
	ws.notes.mu.Unlock()
	ws.wakeOn(k, wakeTarget{}, nil, time.Time{})
}

// watch gives ws the work queue of r's controller, to wake its held workloads.
func (ws *Waves) watch(r *WorkloadReconciler, b *builder.Builder) *builder.Builder {
	if ws == nil {
		return b
	}
	name := r.Kind.Name()
	return b.WatchesRawSource(crsource.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		ws.wakeMu.Lock()
		defer ws.wakeMu.Unlock()
		if ws.queues == nil {
			ws.queues = map[string]workqueue.TypedRateLimitingInterface[reconcile.Request]{}
		}
		ws.queues[name] = q
		return nil
	}))
}

func blockerKey(ns string, ref waves.Ref) string { return ns + "/" + ref.String() }

// wakeOn notes that workload k (t) waits for blockers (none: it waits for nothing), as read
// at read: a blocker whose rollout ended since queues k again at once.
func (ws *Waves) wakeOn(k string, t wakeTarget, blockers []waves.Ref, read time.Time) {
	ws.wakeMu.Lock()
	defer ws.wakeMu.Unlock()
	for b, held := range ws.wake {
		if _, ok := held[k]; ok {
			delete(held, k)
			if len(held) == 0 {
				delete(ws.wake, b)
			}
		}
	}
	if len(blockers) == 0 {
		return
	}
	if ws.wake == nil {
		ws.wake = map[string]map[string]wakeTarget{}
	}
	for _, b := range blockers {
		key := blockerKey(t.nn.Namespace, b)
		if at, ok := ws.ended[key]; ok && !at.Before(read) {
			if q := ws.queues[t.kind]; q != nil {
				q.Add(reconcile.Request{NamespacedName: t.nn})
			}
			continue
		}
		if ws.wake[key] == nil {
			ws.wake[key] = map[string]wakeTarget{}
		}
		ws.wake[key][k] = t
	}
}

// RolloutEnded queues again the workloads held for the workload whose rollout ended (the
// rollout follower's OnOutcome); it does not block.
func (ws *Waves) RolloutEnded(o rollout.Outcome) {
	if ws == nil {
		return
	}
	key := blockerKey(o.Namespace, waves.Ref{Kind: strings.ToLower(o.Kind), Name: o.Name})
	now := time.Now()
	ws.wakeMu.Lock()
	defer ws.wakeMu.Unlock()
	if ws.ended == nil {
		ws.ended = map[string]time.Time{}
	}
	if now.Sub(ws.pruned) > 10*time.Second {
		ws.pruned = now
		for k, at := range ws.ended {
			if now.Sub(at) > time.Minute {
				delete(ws.ended, k)
			}
		}
	}
	ws.ended[key] = now
	for _, t := range ws.wake[key] {
		if q := ws.queues[t.kind]; q != nil {
			q.Add(reconcile.Request{NamespacedName: t.nn})
		}
	}
	delete(ws.wake, key)
}

// readLive reads cached whole, from the API server, unless it was read while the cache held
// the version it holds now (lives).
func (ws *Waves) readLive(ctx context.Context, kind workload.Kind, cached client.Object) (client.Object, error) {
	key, rv := client.ObjectKeyFromObject(cached), cached.GetResourceVersion()
	ws.livesMu.Lock()
	if l, ok := ws.lives[key]; ok && l.cachedAt == rv {
		ws.livesMu.Unlock()
		return l.obj, nil
	}
	ws.livesMu.Unlock()
	fresh := kind.NewObject()
	if err := ws.Live.Get(ctx, key, fresh); err != nil {
		return nil, err
	}
	ws.livesMu.Lock()
	defer ws.livesMu.Unlock()
	if ws.lives == nil || len(ws.lives) >= maxLives {
		ws.lives = map[types.NamespacedName]liveRead{}
	}
	ws.lives[key] = liveRead{cachedAt: rv, obj: fresh}
	return fresh, nil
}
