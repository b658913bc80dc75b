// Package ledger keeps the first records of workloads apart from the workloads: one ConfigMap
// per workload namespace, in reloader's own namespace, holding the record of each workload
// reloader has seen there and not reloaded yet.
//
// A first record is what makes a change made while reloader is down reload when it comes
// back: without it, the content found at start-up would be taken as the one the pods run.
// Written onto each workload it costs one patch per workload at install (2,000 Deployments:
// 2,000 patches, and as many rollout-free updates that GitOps tools see as drift). The
// ledger writes it as one ConfigMap update per namespace per flush (a second), within the
// first-record write budget (--first-sight-rate), and never touches a workload reloader has
// not reloaded. A workload's own record annotation, written with its first reload, wins over
// its ledger entry, which is dropped then.
//
// What a crash loses: the entries not flushed yet (at most a flush's worth). Those workloads
// are first seen again at the next start, as they would be had their turn to be patched not
// come yet; a change made meanwhile is taken as the content they run (docs/guarantees.md).
//
// Trust: the ConfigMaps live in reloader's namespace, which tenants do not write; only the
// ConfigMap named for a namespace (Name) and labelled Label counts for it, and an entry
// counts only for the workload of the UID it names. Each namespace's ConfigMap is capped at
// MaxBytes: a namespace past it has its further first records patched onto the workloads,
// as without a ledger (Room), so its cost to reloader is bounded.
package ledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

const (
	// Label marks the ledger's ConfigMaps; its value is the workload namespace.
	Label = "reloader.dev/first-records"
	// Prefix starts the name of a namespace's ConfigMap: Prefix + namespace.
	Prefix = "reloader-first-records."
	// MaxBytes caps the data of one namespace's ConfigMap (etcd takes objects up to 1.5 MiB,
	// the API server's default request limit is 3 MiB): about 5,000 workloads.
	MaxBytes = 900 << 10
	// FlushEvery is how often the entries kept since the last flush are written.
	FlushEvery = time.Second
)

// ErrNotLoaded is returned while the ledger's ConfigMaps have not been listed yet: a record
// asked for then might be there.
var ErrNotLoaded = errors.New("the ledger of first records is not loaded yet")

// Name is the ConfigMap holding namespace's first records.
func Name(namespace string) string { return Prefix + namespace }

// Key names a workload's entry: its kind and name (ConfigMap keys allow both).
func Key(kind, name string) string { return kind + "." + name }

var keyChars = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

// Ledger keeps the first records of the workloads of every namespace reloader handles. Its
// zero value is not usable: New.
type Ledger struct {
	cs        corev1client.ConfigMapsGetter // nil: read-only (Static)
	namespace string
	informer  toolscache.SharedIndexInformer
	store     toolscache.Store
	synced    func() bool
	log       logr.Logger
	// Budget waits for a write slot of the first-record budget; nil writes at once.
	Budget func(ctx context.Context) error
	// Refused, when set, is told once that the ledger may not be written (RBAC): first
	// records go onto the workloads from then on.
	Refused func(err error)

	mu sync.Mutex
	// pending are the entries kept and not yet seen in the informer's ConfigMap, by workload
	// namespace and key: those not written yet, and those written whose echo has not come
	// (see entry). Record reads them before the informer's.
	pending map[string]map[string]entry
	// dirty are the namespaces the next flush writes: with entries not written yet, or
	// whose every entry is stale.
	dirty map[string]bool
	// stale are the entries dropped (Drop) that the namespace's next write removes, with the
	// flush they were dropped in; those the ConfigMap does not hold go staleFor flushes on.
	stale map[string]map[string]uint64
	// sizes are the bytes each namespace's ConfigMap holds with its pending entries, as last
	// counted (Room).
	sizes map[string]int
	// flushes counts the flushes begun: an entry is written by one of them.
	flushes uint64
	// off: the ledger may not be written (first records go onto the workloads); unread: it
	// may not be listed either, so the records written in it before are out of reach too.
	off, unread bool
	// keepEmpty: reloader may not delete ConfigMaps; a ConfigMap left with no entry is kept
	// empty.
	keepEmpty atomic.Bool
}

// entry is a pending entry: its value ("" drops the key), and the flush that wrote it (0:
// not written yet). A written entry stays pending until the informer's ConfigMap holds it:
// between the write and its echo, and while the flush waits for its budget slot, it would be
// in neither place, and a reconcile asking then would take its workload for one never seen,
// record the live content as its baseline, and so never reload a change made meanwhile.
// What stays pending longer (the watch is down, or another replica changed the entry since)
// is at most what the namespace's ConfigMap holds, and goes with the key's next Put or Drop.
type entry struct {
	v       string
	written uint64
}

// staleFor is how many flushes a dropped entry the informer's ConfigMap does not hold is kept
// for the namespace's next write (a write on its way may still bring it).
const staleFor = 30

// echoed reports whether e, namespace's entry k, is written and data, the informer's
// ConfigMap's, holds it: it is read from there from now on.
func (e entry) echoed(data map[string]string, k string) bool {
	return e.written != 0 && holds(data, k, e.v)
}

// New returns the ledger kept in namespace (reloader's own), read through an informer on
// its labelled ConfigMaps and written through cs: the core client alone (a whole clientset
// behind an interface would link every API group's client into the binary).
func New(cs corev1client.ConfigMapsGetter, namespace string, logger logr.Logger) *Ledger {
	// A ListWatch of its own: the informer factory would link every API group's informers
	// into the binary (a megabyte of pages a small install maps).
	cms := cs.ConfigMaps(namespace)
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = Label
			return cms.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = Label
			return cms.Watch(ctx, o)
		},
	}
	// The client says whether it streams lists (a fake does not), as the factory would ask.
	inf := toolscache.NewSharedIndexInformer(toolscache.ToListWatcherWithWatchListSemantics(lw, cs), &corev1.ConfigMap{}, 0, toolscache.Indexers{})
	l := &Ledger{cs: cs, namespace: namespace, informer: inf, store: inf.GetStore(), synced: inf.HasSynced, log: logger,
		pending: map[string]map[string]entry{}, dirty: map[string]bool{}, sizes: map[string]int{}, stale: map[string]map[string]uint64{}}
	_ = l.informer.SetWatchErrorHandler(func(_ *toolscache.Reflector, err error) {
		if apierrors.IsForbidden(err) {
			// Never listed, the ledger would hold every first sighting back.
			l.mu.Lock()
			l.unread = true
			l.mu.Unlock()
			l.refuse(err)
			return
		}
		l.log.V(1).Info("the ledger's watch failed; retrying", "error", err.Error())
	})
	return l
}

// Static returns a read-only ledger of the ConfigMaps given, read from namespace: what
// `reloader explain` reads, once. It takes no record (Room is false).
func Static(namespace string, cms ...*corev1.ConfigMap) *Ledger {
	store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	for _, cm := range cms {
		_ = store.Add(cm)
	}
	return &Ledger{namespace: namespace, store: store, synced: func() bool { return true }, log: logr.Discard(), off: true,
		pending: map[string]map[string]entry{}, dirty: map[string]bool{}, sizes: map[string]int{}, stale: map[string]map[string]uint64{}}
}

// Namespace is where the ledger lives.
func (l *Ledger) Namespace() string { return l.namespace }

// Start runs the ledger until ctx ends: its informer, and a flush of the pending entries
// every FlushEvery (and once more when ctx ends, within a few seconds).
func (l *Ledger) Start(ctx context.Context) error {
	// A create, dry: refused, the ledger is off before any record is kept in it.
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: Prefix + "probe", Namespace: l.namespace, Labels: map[string]string{Label: ""}}}
	if _, err := l.cs.ConfigMaps(l.namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
		l.refuse(err)
	}
	go l.informer.Run(ctx.Done())
	t := time.NewTicker(FlushEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			l.Flush(final)
			return nil
		case <-t.C:
			l.Flush(ctx)
		}
	}
}

// NeedLeaderElection is false: every replica reads the ledger; only the one reconciling a
// namespace writes its entries.
func (l *Ledger) NeedLeaderElection() bool { return false }

// Synced reports whether the ConfigMaps have been listed.
func (l *Ledger) Synced() bool { return l.synced() }

// Off reports whether the ledger was refused and first records go onto the workloads; the
// records written in it before are still read while it may be listed.
func (l *Ledger) Off() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.off
}

// Record returns the record the ledger holds for the workload of kind, namespace, name and
// uid: the encoded record, as its annotation would hold it. ErrNotLoaded until the first list.
func (l *Ledger) Record(kind, namespace, name string, uid types.UID) (string, bool, error) {
	if l == nil {
		return "", false, nil
	}
	k := Key(kind, name)
	l.mu.Lock()
	unread := l.unread
	e, pending := l.pending[namespace][k]
	l.mu.Unlock()
	v := e.v
	if unread {
		return "", false, nil
	}
	if !pending {
		if !l.synced() {
			return "", false, ErrNotLoaded
		}
		cm := l.stored(namespace)
		if cm == nil {
			return "", false, nil
		}
		v = cm.Data[k]
	}
	rec, ok := parse(v, uid)
	return rec, ok, nil
}

// Room reports whether the ledger takes the record of a workload of kind and name in
// namespace: false when it is off, the key is not a ConfigMap key, or the namespace's
// ConfigMap is at its cap (the record is then written onto the workload).
func (l *Ledger) Room(kind, namespace, name string) bool {
	if l == nil || l.cs == nil {
		return false
	}
	k := Key(kind, name)
	if len(k) > 253 || !keyChars.MatchString(k) {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.off && l.size(namespace) < MaxBytes-1024
}

// Put keeps rec as the record of the workload of kind, namespace, name and uid, written with
// the next flush. It returns false, keeping nothing, where Room would.
func (l *Ledger) Put(kind, namespace, name string, uid types.UID, rec string) bool {
	if !l.Room(kind, namespace, name) {
		return false
	}
	l.set(namespace, Key(kind, name), string(uid)+" "+rec)
	return true
}

// Drop forgets the entry of the workload of kind, namespace and name, if there is one: its
// own record annotation holds its record now, or it is gone. An entry written already leaves
// with the namespace's next write (its record annotation wins meanwhile, and a workload
// re-created under the name has another UID): a reload costs no write of the ledger.
func (l *Ledger) Drop(kind, namespace, name string) {
	if l == nil {
		return
	}
	k := Key(kind, name)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.off {
		return
	}
	cm := l.stored(namespace)
	p := l.pending[namespace]
	if e, ok := p[k]; ok && e.written == 0 {
		if e.v != "" {
			l.setLocked(namespace, k, "")
		}
		return
	} else if ok {
		delete(p, k) // written: it leaves as a stored entry does
	} else if _, held := cmData(cm)[k]; !held {
		return
	}
	l.markStale(namespace, k)
	l.emptied(namespace, cm)
}

// markStale keeps namespace's entry k for removal with its next write (l.mu held).
func (l *Ledger) markStale(namespace, k string) {
	if l.stale[namespace] == nil {
		l.stale[namespace] = map[string]uint64{}
	}
	l.stale[namespace][k] = l.flushes
}

// emptied names namespace for the next flush when every entry its ConfigMap cm holds is
// stale and none is pending (its workloads reloaded, or are gone with their namespace): the
// ConfigMap goes then, one delete, rather than wait for a write that may never come (l.mu
// held).
func (l *Ledger) emptied(namespace string, cm *corev1.ConfigMap) {
	stale := l.stale[namespace]
	if cm != nil && len(l.pending[namespace]) == 0 && len(stale) >= len(cm.Data) && allIn(cm.Data, stale) {
		l.dirty[namespace] = true
	}
}

// cmData is cm's data, nil for no ConfigMap.
func cmData(cm *corev1.ConfigMap) map[string]string {
	if cm == nil {
		return nil
	}
	return cm.Data
}

// allIn reports whether every key of data is in keys.
func allIn[V any](data map[string]string, keys map[string]V) bool {
	for k := range data {
		if _, ok := keys[k]; !ok {
			return false
		}
	}
	return true
}

func (l *Ledger) set(namespace, k, v string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setLocked(namespace, k, v)
}

// setLocked keeps v as namespace's entry k, to be written (l.mu held).
func (l *Ledger) setLocked(namespace, k, v string) {
	if l.off {
		return
	}
	n := l.size(namespace)
	p := l.pending[namespace]
	if p == nil {
		p = map[string]entry{}
		l.pending[namespace] = p
	}
	if old, ok := p[k]; ok {
		if old.v != "" {
			n -= len(k) + len(old.v)
		}
	} else if old, ok := cmData(l.stored(namespace))[k]; ok {
		n -= len(k) + len(old)
	}
	if v != "" {
		n += len(k) + len(v)
	}
	l.sizes[namespace] = max(n, 0)
	p[k] = entry{v: v}
	l.dirty[namespace] = true
}

// size is what namespace's ConfigMap would hold with the pending entries, counted at most
// once per flush (l.mu held).
func (l *Ledger) size(namespace string) int {
	if n, ok := l.sizes[namespace]; ok {
		return n
	}
	n := 0
	p := l.pending[namespace]
	for k, v := range cmData(l.stored(namespace)) {
		if _, over := p[k]; !over {
			n += len(k) + len(v)
		}
	}
	for k, e := range p {
		if e.v != "" {
			n += len(k) + len(e.v)
		}
	}
	l.sizes[namespace] = n
	return n
}

// stored is namespace's ConfigMap as the informer holds it; nil when there is none.
func (l *Ledger) stored(namespace string) *corev1.ConfigMap {
	o, ok, err := l.store.GetByKey(l.namespace + "/" + Name(namespace))
	if err != nil || !ok {
		return nil
	}
	cm, ok := o.(*corev1.ConfigMap)
	if !ok || cm.Labels[Label] != namespace {
		return nil
	}
	return cm
}

// Flush writes the entries not written yet and the drops of stale ones: one write per
// namespace that has any (a delete when none is left), each within the budget. Entries whose
// write fails are written with the next flush; a refusal (RBAC) turns the ledger off. Written
// entries the informer now holds are forgotten first.
func (l *Ledger) Flush(ctx context.Context) {
	l.mu.Lock()
	l.flushes++
	seq := l.flushes
	for ns, p := range l.pending {
		data := cmData(l.stored(ns))
		for k, e := range p {
			if e.echoed(data, k) {
				delete(p, k)
			}
		}
		if len(p) == 0 {
			delete(l.pending, ns)
		}
	}
	for ns, stale := range l.stale {
		cm := l.stored(ns)
		for k, at := range stale {
			if _, held := cmData(cm)[k]; !held && seq-at > staleFor {
				delete(stale, k)
			}
		}
		if len(stale) == 0 {
			delete(l.stale, ns)
			continue
		}
		l.emptied(ns, cm) // the last drop came before the informer held the entry
	}
	batch := map[string]map[string]string{}
	for ns := range l.dirty {
		entries := map[string]string{}
		p := l.pending[ns]
		for k, e := range p {
			if e.written == 0 {
				entries[k] = e.v
				p[k] = entry{v: e.v, written: seq}
			}
		}
		for k := range l.stale[ns] {
			if _, kept := p[k]; !kept {
				entries[k] = ""
			}
		}
		delete(l.stale, ns)
		batch[ns] = entries
	}
	l.dirty, l.sizes = map[string]bool{}, map[string]int{}
	l.mu.Unlock()
	for ns, entries := range batch {
		if ctx.Err() != nil || l.Budget != nil && l.Budget(ctx) != nil {
			l.unwritten(ns, entries, seq)
			continue
		}
		err := l.write(ctx, ns, entries)
		delete(batch, ns)
		switch {
		case err == nil:
		case apierrors.IsForbidden(err):
			// This write and those not tried are not written: the refusal forgets them.
			l.unwritten(ns, entries, seq)
			for ns, entries := range batch {
				l.unwritten(ns, entries, seq)
			}
			l.refuse(err)
			return
		default:
			l.log.Info("could not write the first records of a namespace; retrying with the next flush", "namespace", ns, "entries", len(entries), "error", err.Error())
			l.unwritten(ns, entries, seq)
		}
	}
}

// holds reports whether data, a namespace's ConfigMap's, holds entry k as v ("": absent).
func holds(data map[string]string, k, v string) bool {
	got, ok := data[k]
	if v == "" {
		return !ok
	}
	return got == v
}

// unwritten marks entries, taken by flush seq for namespace, as not written: those still
// pending as that flush took them are written again with the next flush, and the drops of
// stale entries are kept.
func (l *Ledger) unwritten(ns string, entries map[string]string, seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.off {
		return
	}
	p := l.pending[ns]
	for k, v := range entries {
		e, ok := p[k]
		switch {
		case ok && e.written == seq:
			p[k] = entry{v: e.v}
		case !ok && v == "":
			l.markStale(ns, k)
		}
	}
	l.dirty[ns] = true
	delete(l.sizes, ns)
}

// refuse turns the ledger off: the entries not written are forgotten (their workloads are
// first seen again at their next reconcile, and recorded onto themselves); those written are
// read until the informer holds them.
func (l *Ledger) refuse(err error) {
	l.mu.Lock()
	was := l.off
	l.off, l.dirty, l.sizes, l.stale = true, map[string]bool{}, map[string]int{}, map[string]map[string]uint64{}
	for ns, p := range l.pending {
		for k, e := range p {
			if e.written == 0 {
				delete(p, k)
			}
		}
		if len(p) == 0 {
			delete(l.pending, ns)
		}
	}
	l.mu.Unlock()
	if was {
		return
	}
	l.log.Info("may not write the ledger of first records; writing first records onto the workloads instead", "namespace", l.namespace,
		"grant", "configmaps get, list, watch, create, update in "+l.namespace, "error", err.Error())
	if l.Refused != nil {
		l.Refused(err)
	}
}

// write applies entries to namespace's ConfigMap: an update of the version last read (a
// create when there is none), read again from the API server and retried once on a conflict
// (another replica, or the one that held the namespace's shard before, wrote it meanwhile).
func (l *Ledger) write(ctx context.Context, ns string, entries map[string]string) error {
	cms := l.cs.ConfigMaps(l.namespace)
	cur := l.stored(ns)
	for try := 0; ; try++ {
		var err error
		if cur == nil {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: Name(ns), Namespace: l.namespace,
				Labels: map[string]string{Label: ns, "app.kubernetes.io/managed-by": "reloader"}}, Data: apply(nil, entries)}
			if len(cm.Data) == 0 {
				return nil
			}
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: "reloader"})
		} else {
			cm := cur.DeepCopy()
			cm.Data = apply(cm.Data, entries)
			if cm.Labels[Label] != ns {
				return fmt.Errorf("%s/%s is not labelled %s=%s", l.namespace, cm.Name, Label, ns)
			}
			if maps.Equal(cm.Data, cur.Data) {
				return nil
			}
			if len(cm.Data) == 0 && !l.keepEmpty.Load() {
				err = l.remove(ctx, cur)
			} else {
				_, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: "reloader"})
			}
		}
		if err == nil || try > 0 || !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			return err
		}
		got, gerr := cms.Get(ctx, Name(ns), metav1.GetOptions{})
		if apierrors.IsNotFound(gerr) {
			cur = nil
			continue
		}
		if gerr != nil {
			return gerr
		}
		cur = got
	}
}

// remove deletes cur, a namespace's ConfigMap left with no entry, on the condition that it is
// still the version read (else a conflict: another replica wrote it meanwhile). Gone already
// is done. Where reloader may not delete ConfigMaps (upstream's chart grants no delete), it is
// left empty, and so are the next ones: the refusal turns nothing off.
func (l *Ledger) remove(ctx context.Context, cur *corev1.ConfigMap) error {
	uid, rv := cur.UID, cur.ResourceVersion
	err := l.cs.ConfigMaps(l.namespace).Delete(ctx, cur.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsForbidden(err):
		l.keepEmpty.Store(true)
		l.log.Info("may not delete the ledger's empty ConfigMaps; leaving them empty", "namespace", l.namespace,
			"grant", "configmaps delete in "+l.namespace, "error", err.Error())
		cm := cur.DeepCopy()
		cm.Data = nil
		_, err = l.cs.ConfigMaps(l.namespace).Update(ctx, cm, metav1.UpdateOptions{FieldManager: "reloader"})
	}
	return err
}

// apply returns data with entries set (an empty value deletes its key).
func apply(data, entries map[string]string) map[string]string {
	out := maps.Clone(data)
	if out == nil {
		out = map[string]string{}
	}
	for k, v := range entries {
		if v == "" {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	return out
}

// parse reads an entry "uid record": the record when uid is the workload's.
func parse(v string, uid types.UID) (string, bool) {
	u, rec, ok := strings.Cut(v, " ")
	if !ok || u != string(uid) || rec == "" {
		return "", false
	}
	return rec, true
}

// Holds reports whether cm, a namespace's ledger ConfigMap, holds a record of the workload
// of uid: what a test or a tool reads to learn that reloader has seen a workload it keeps no
// annotation on.
func Holds(cm *corev1.ConfigMap, uid types.UID) bool {
	_, ok := RecordIn(cm, uid)
	return ok
}

// RecordIn is the record cm, a namespace's ledger ConfigMap, holds for the workload of uid.
func RecordIn(cm *corev1.ConfigMap, uid types.UID) (string, bool) {
	for _, v := range cm.Data {
		if rec, ok := parse(v, uid); ok {
			return rec, true
		}
	}
	return "", false
}

// UIDs are the UIDs of the workloads whose records cm, a ledger ConfigMap, holds.
func UIDs(cm *corev1.ConfigMap) []types.UID {
	out := make([]types.UID, 0, len(cm.Data))
	for _, v := range cm.Data {
		if u, _, ok := strings.Cut(v, " "); ok {
			out = append(out, types.UID(u))
		}
	}
	return out
}
