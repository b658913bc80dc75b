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
	"slices"
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
	// pending are the entries kept since the last flush, by workload namespace and key; an
	// empty value drops the key.
	pending map[string]map[string]string
	// stale are the entries dropped (Drop) that the namespace's next write removes.
	stale map[string]map[string]bool
	// flying are the entries a flush took, by namespace, until the informer holds the
	// write: read in place of the stored ones meanwhile (see flight).
	flying map[string]*flight
	// sizes are the bytes each namespace's ConfigMap holds with its pending entries, as last
	// counted (Room).
	sizes map[string]int
	// off: the ledger may not be written (first records go onto the workloads); unread: it
	// may not be listed either, so the records written in it before are out of reach too.
	off, unread bool
	// keepEmpty: reloader may not delete ConfigMaps; a ConfigMap left with no entry is kept
	// empty.
	keepEmpty atomic.Bool
}

// flight is a namespace's entries taken by a flush. Between the flush taking them (then
// waiting for the budget) and the informer seeing the write, they are neither pending nor
// stored: a reconcile asking then would find no record and take the live content as the
// baseline, so that a change made meanwhile would never reload, and a plan would call the
// workload first seen. They are read from here until the informer's ConfigMap holds them,
// or, the write done, holds a version that is neither one the write started from nor its
// own (another replica's, written after it).
type flight struct {
	entries map[string]string
	// from are the resourceVersions the write started from ("": no ConfigMap); to is the
	// one it made, once done.
	from []string
	to   string
	done bool
}

// landed reports whether cm, the informer's ConfigMap of the flight's namespace, holds the
// flight.
func (f *flight) landed(cm *corev1.ConfigMap) bool {
	if v := rv(cm); f.done && v != f.to && !slices.Contains(f.from, v) {
		return true
	}
	for k, v := range f.entries {
		var got string
		if cm != nil {
			got = cm.Data[k]
		}
		if got != v {
			return false
		}
	}
	return true
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
		pending: map[string]map[string]string{}, sizes: map[string]int{}, stale: map[string]map[string]bool{}, flying: map[string]*flight{}}
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
		pending: map[string]map[string]string{}, sizes: map[string]int{}, stale: map[string]map[string]bool{}, flying: map[string]*flight{}}
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
	v, pending := l.pending[namespace][k]
	if !pending {
		v, pending = l.inFlight(namespace, k)
	}
	l.mu.Unlock()
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
	v, pending := l.pending[namespace][k]
	flying, inFlight := l.inFlight(namespace, k)
	l.mu.Unlock()
	if pending {
		if v != "" {
			l.set(namespace, k, "")
		}
		return
	}
	cm := l.stored(namespace)
	var held bool
	if cm != nil {
		_, held = cm.Data[k]
	}
	if !held && (!inFlight || flying == "") {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.off {
		return
	}
	if l.stale[namespace] == nil {
		l.stale[namespace] = map[string]bool{}
	}
	stale := l.stale[namespace]
	stale[k] = true
	if cm != nil && l.flying[namespace] == nil && len(l.pending[namespace]) == 0 && len(stale) >= len(cm.Data) && allIn(cm.Data, stale) {
		// Every entry is stale (the namespace's workloads reloaded, or are gone with their
		// namespace): the ConfigMap goes with the next flush, one delete, rather than wait
		// for a write that may never come.
		l.pendingIn(namespace)
	}
}

// inFlight is the entry k of namespace's flight, if the informer does not hold the write
// yet; a flight it holds is forgotten (l.mu held).
func (l *Ledger) inFlight(namespace, k string) (string, bool) {
	f := l.flying[namespace]
	if f == nil {
		return "", false
	}
	if f.landed(l.stored(namespace)) {
		delete(l.flying, namespace)
		return "", false
	}
	v, ok := f.entries[k]
	return v, ok
}

// rv is cm's resourceVersion, "" for none.
func rv(cm *corev1.ConfigMap) string {
	if cm == nil {
		return ""
	}
	return cm.ResourceVersion
}

// allIn reports whether every key of data is in keys.
func allIn(data map[string]string, keys map[string]bool) bool {
	for k := range data {
		if !keys[k] {
			return false
		}
	}
	return true
}

func (l *Ledger) set(namespace, k, v string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.off {
		return
	}
	p := l.pendingIn(namespace)
	l.sizes[namespace] = l.size(namespace) + len(k) + len(v) - len(p[k])
	p[k] = v
}

// size is what namespace's ConfigMap would hold with the pending entries, counted at most
// once per flush (l.mu held).
func (l *Ledger) size(namespace string) int {
	if n, ok := l.sizes[namespace]; ok {
		return n
	}
	n := 0
	cm := l.stored(namespace)
	var data map[string]string
	if cm != nil {
		data = cm.Data
		for k, v := range data {
			n += len(k) + len(v)
		}
	}
	if f := l.flying[namespace]; f != nil && !f.landed(cm) {
		// A flush's entries on their way count as written.
		for k, v := range f.entries {
			if old, ok := data[k]; ok {
				n -= len(k) + len(old)
			}
			if v != "" {
				n += len(k) + len(v)
			}
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

// Flush writes the pending entries: one write per namespace that has any, each within the
// budget. Entries whose write fails stay pending for the next flush; a refusal (RBAC) turns
// the ledger off.
func (l *Ledger) Flush(ctx context.Context) {
	l.mu.Lock()
	batch := l.pending
	for ns, entries := range batch {
		for k := range l.stale[ns] {
			if _, newer := entries[k]; !newer {
				entries[k] = ""
			}
		}
		delete(l.stale, ns)
		next := &flight{entries: maps.Clone(entries), from: []string{rv(l.stored(ns))}}
		if f := l.flying[ns]; f != nil && !f.landed(l.stored(ns)) {
			// The last flight is not in the informer yet: this one is read over it.
			next.entries = maps.Clone(f.entries)
			maps.Copy(next.entries, entries)
			next.from = append(next.from, f.from...)
			if f.done {
				next.from = append(next.from, f.to)
			}
		}
		l.flying[ns] = next
	}
	l.pending, l.sizes = map[string]map[string]string{}, map[string]int{}
	l.mu.Unlock()
	for ns, entries := range batch {
		if ctx.Err() != nil || l.Budget != nil && l.Budget(ctx) != nil {
			l.requeue(ns, entries)
			continue
		}
		err := l.write(ctx, ns, entries)
		switch {
		case err == nil:
		case apierrors.IsForbidden(err):
			l.refuse(err)
			return
		default:
			l.log.Info("could not write the first records of a namespace; retrying with the next flush", "namespace", ns, "entries", len(entries), "error", err.Error())
			l.requeue(ns, entries)
		}
	}
}

// requeue puts entries back under the ones kept since (newer win).
func (l *Ledger) requeue(ns string, entries map[string]string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.off {
		return
	}
	p := l.pendingIn(ns)
	for k, v := range entries {
		if _, newer := p[k]; !newer {
			p[k] = v
		}
	}
	delete(l.sizes, ns)
	delete(l.flying, ns)
}

// pendingIn is namespace's pending entries, made when it has none (l.mu held).
func (l *Ledger) pendingIn(namespace string) map[string]string {
	p := l.pending[namespace]
	if p == nil {
		p = map[string]string{}
		l.pending[namespace] = p
	}
	return p
}

func (l *Ledger) refuse(err error) {
	l.mu.Lock()
	was := l.off
	l.off, l.pending, l.sizes, l.flying = true, map[string]map[string]string{}, map[string]int{}, map[string]*flight{}
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
		var (
			err  error
			made *corev1.ConfigMap // nil: deleted
		)
		if cur == nil {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: Name(ns), Namespace: l.namespace,
				Labels: map[string]string{Label: ns, "app.kubernetes.io/managed-by": "reloader"}}, Data: apply(nil, entries)}
			if len(cm.Data) == 0 {
				return nil
			}
			made, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: "reloader"})
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
				made, err = l.remove(ctx, cur)
			} else {
				made, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: "reloader"})
			}
		}
		if err == nil {
			l.wrote(ns, rv(made))
		}
		if err == nil || try > 0 || !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			return err
		}
		got, gerr := cms.Get(ctx, Name(ns), metav1.GetOptions{})
		if apierrors.IsNotFound(gerr) {
			cur = nil
			l.startsFrom(ns, "")
			continue
		}
		if gerr != nil {
			return gerr
		}
		cur = got
		l.startsFrom(ns, got.ResourceVersion)
	}
}

// startsFrom adds version to those namespace's flight starts from: a write retried from a
// version read again is not in the informer while it holds that one.
func (l *Ledger) startsFrom(namespace, version string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f := l.flying[namespace]; f != nil && !slices.Contains(f.from, version) {
		f.from = append(f.from, version)
	}
}

// wrote marks namespace's flight done, its write having made version ("": deleted).
func (l *Ledger) wrote(namespace, version string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f := l.flying[namespace]; f != nil {
		f.done, f.to = true, version
	}
}

// remove deletes cur, a namespace's ConfigMap left with no entry, on the condition that it is
// still the version read (else a conflict: another replica wrote it meanwhile). Gone already
// is done. Where reloader may not delete ConfigMaps (upstream's chart grants no delete), it is
// left empty, and so are the next ones: the refusal turns nothing off.
// It returns the ConfigMap left, nil when deleted.
func (l *Ledger) remove(ctx context.Context, cur *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	uid, version := cur.UID, cur.ResourceVersion
	err := l.cs.ConfigMaps(l.namespace).Delete(ctx, cur.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &version}})
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil, nil
	case apierrors.IsForbidden(err):
		l.keepEmpty.Store(true)
		l.log.Info("may not delete the ledger's empty ConfigMaps; leaving them empty", "namespace", l.namespace,
			"grant", "configmaps delete in "+l.namespace, "error", err.Error())
		cm := cur.DeepCopy()
		cm.Data = nil
		return l.cs.ConfigMaps(l.namespace).Update(ctx, cm, metav1.UpdateOptions{FieldManager: "reloader"})
	}
	return nil, err
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
