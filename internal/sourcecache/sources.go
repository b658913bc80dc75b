package sourcecache

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/cachemem/intern"
	"github.com/reloader-operator/reloader/internal/extapi"
	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/workload"
)

// Inside reloader's cache a source's content is replaced by what reloader reads of it, packed
// into one string (see packed): the content hash, a Secret's hash in the UID-keyed scheme that
// upgrades old records, and one digest per key. The string lives in metadata.selfLink, which
// the API server has left unset on every object since v1.20 (RemoveSelfLink, GA in v1.24):
// there a source costs one string, where annotations and a digest map cost a map each, about
// 1 KiB a source. cacheMark starts it, so a transformed object is told from a full one.
const cacheMark = "reloader-cache "

// IndexPooledSource indexes the objects of a pooled source type by the source they belong to.
const IndexPooledSource = "reloader.pooled-source"

// SourceType is how the controller reads one kind of source.
type SourceType struct {
	Kind source.Kind
	// Resource is the watched objects' API resource, as upstream's metrics name it.
	Resource string
	// NewObject and NewList make the watched objects.
	NewObject func() client.Object
	NewList   func() client.ObjectList
	// Hash computes the content hash of a full watched object.
	Hash func(client.Object) string
	// UIDHash computes the hash of the UID-keyed scheme, for Secrets only.
	UIDHash func(client.Object) string
	// KeyDigests computes a short digest of each key of a full watched object, for the types
	// whose content is made of keys; nil for the others. Transform keeps them in place of the
	// content, so that a workload can hash some keys only (hash.Subset). It returns nil for a
	// source over the cap (hash.MaxKeyDigests): only its whole content is hashed.
	KeyDigests func(client.Object) map[string]string
	// Ready, when set, blocks Transform until Hash can work (the Secret hash key is loaded);
	// an error leaves the object out of the cache, and the informer retries.
	Ready func() error
	// Field narrows the watch server-side.
	Field fields.Selector
	// Pool is set when a source is seen through many objects, one per pod (CSI mounts).
	Pool *Pool
	// DropLabels has Transform drop the labels too. Set it when no ReloaderConfig can select
	// sources (the API is not served or not readable): then no decision reads them.
	DropLabels bool
	// Intern shares the strings that repeat across cached objects: the manager's tables
	// (nil: none).
	Intern *intern.Tables
}

// Pool describes a source made of many watched objects: its content is the union of theirs.
type Pool struct {
	// SourceName names the source a watched object belongs to.
	SourceName func(client.Object) string
	// Versions lists an object's "id=version" pairs.
	Versions func(client.Object) []string
}

// KeySource gives the Secret hash key once it is loaded: a hash.Key, or a hashkey.Loader.
type KeySource interface {
	// Wait blocks until the key is loaded or ctx ends.
	Wait(ctx context.Context) error
	Key() hash.Key
}

// Secrets is the Secret source type, hashed under the install's key.
func Secrets(key KeySource) SourceType {
	return SourceType{
		// The cache's Transform has no context: the Loader's own bounds the wait.
		Ready:     func() error { return key.Wait(context.Background()) },
		Kind:      source.Secret,
		Resource:  "secrets",
		NewObject: func() client.Object { return &corev1.Secret{} },
		NewList:   func() client.ObjectList { return &corev1.SecretList{} },
		Hash:      func(o client.Object) string { return hash.Secret(key.Key(), o.(*corev1.Secret)) },
		UIDHash:   func(o client.Object) string { return hash.UIDKeyedSecret(o.(*corev1.Secret)) },
		KeyDigests: func(o client.Object) map[string]string {
			return hash.SecretKeys(key.Key(), o.(*corev1.Secret))
		},
		// Service account tokens are rotated by Kubernetes and are never user config.
		Field: fields.OneTermNotEqualSelector("type", string(corev1.SecretTypeServiceAccountToken)),
	}
}

// ConfigMaps and CSIMounts are the source types that need no key.
var (
	ConfigMaps = SourceType{
		Kind:      source.ConfigMap,
		Resource:  "configmaps",
		NewObject: func() client.Object { return &corev1.ConfigMap{} },
		NewList:   func() client.ObjectList { return &corev1.ConfigMapList{} },
		Hash:      func(o client.Object) string { return hash.ConfigMap(o.(*corev1.ConfigMap)) },
		KeyDigests: func(o client.Object) map[string]string {
			return hash.ConfigMapKeys(o.(*corev1.ConfigMap))
		},
	}
	// CSIMounts see a SecretProviderClass through the Secrets Store CSI driver's status of
	// each pod's mount: a new object version in any of them is a change of the class.
	CSIMounts = SourceType{
		Kind:      source.SecretProviderClass,
		Resource:  "secretproviderclasspodstatuses",
		NewObject: func() client.Object { return &extapi.SecretProviderClassPodStatus{} },
		NewList:   func() client.ObjectList { return &extapi.SecretProviderClassPodStatusList{} },
		Hash:      func(o client.Object) string { return hash.Versions(mountVersions(o)) },
		Pool: &Pool{
			SourceName: func(o client.Object) string {
				return o.(*extapi.SecretProviderClassPodStatus).Status.SecretProviderClassName
			},
			Versions: mountVersions,
		},
	}
)

func mountVersions(o client.Object) []string {
	objs := o.(*extapi.SecretProviderClassPodStatus).Status.Objects
	out := make([]string, 0, len(objs))
	for _, obj := range objs {
		out = append(out, obj.ID+"="+obj.Version)
	}
	return out
}

// Transform replaces a source's content by its hash and, for the types made of keys, each
// value by a short digest (KeyDigests), before the object enters the cache, so that
// reloader's memory grows with the number of objects and keys, not with their bytes; past
// hash.MaxKeyDigests keys, with the number of objects only (whole hash, no digests). The
// managed fields (but for their newest writers, packed with the hashes) and kubectl's
// last-applied copy of the content go too, the labels with
// DropLabels, and the strings that repeat across objects are shared (Intern).
//
// The informer may hand the same object to Transform more than once (objects of the initial
// list are, and the shard streams pass on an object the store holds as its deletion when a
// shard is handed over): the second pass must keep the hash of the content, not hash the
// emptied object, and must write nothing to it, since the cache's readers share it meanwhile
// (a map written while read is fatal). So each field is written only where something is
// left to drop, and the strings of a marked object are not interned again.
func (t SourceType) Transform(obj any) (any, error) {
	o, ok := obj.(client.Object)
	if !ok {
		return obj, nil
	}
	_, done := cached(o)
	if !done {
		if t.Ready != nil {
			if err := t.Ready(); err != nil {
				return nil, err
			}
		}
		p := packed{hash: t.Hash(o)}
		if t.UIDHash != nil {
			p.uidHash = t.UIDHash(o)
		}
		if t.KeyDigests != nil {
			// Bounded work under the informer's lock: at most hash.MaxKeyDigests digests.
			if p.digests = t.KeyDigests(o); p.digests == nil {
				p.overCap = max(keyCount(o), 1)
			}
		}
		if t.Pool == nil {
			// Reported with each change; a pooled source's objects are the CSI driver's.
			p.writer = writerToken(o)
		}
		o.SetSelfLink(p.marked())
	}
	// Checked on both passes: a mark that came from elsewhere never keeps content in memory.
	dropContent(o)
	if o.GetManagedFields() != nil {
		o.SetManagedFields(nil)
	}
	if t.DropLabels && o.GetLabels() != nil {
		o.SetLabels(nil)
	}
	// kubectl's last-applied copy holds the whole content again: a Secret's values in the
	// clear, a ConfigMap's bytes. No decision reads it.
	workload.DropLastApplied(o)
	if !done {
		t.Intern.Meta(o)
	}
	return o, nil
}

// dropContent clears what a ConfigMap or a Secret holds of its content, writing only the
// fields that hold some.
func dropContent(o client.Object) {
	switch v := o.(type) {
	case *corev1.ConfigMap:
		if v.Data != nil {
			v.Data = nil
		}
		if v.BinaryData != nil {
			v.BinaryData = nil
		}
	case *corev1.Secret:
		if v.Data != nil {
			v.Data = nil
		}
		if v.StringData != nil {
			v.StringData = nil
		}
	}
}

// packed is what the cache keeps of a source's content. Its string form is space-separated:
// hash, UID-keyed hash (empty for all but Secrets), the newest managedFields entries
// (whatchanged.Pack, empty when unknown), then key and digest pairs in key order, or for a
// source over the cap (hash.MaxKeyDigests) "*" and its number of keys. No part holds a space: hashes
// and digests are hex (a Secret's prefixed by its key ID, a CSI mount's comma-separated), a
// writer token is made of safe characters only, and the API server admits only
// [-._a-zA-Z0-9] in keys (so no key starts with "*").
type packed struct {
	hash, uidHash, writer string
	digests               map[string]string
	// overCap is the number of keys of a source over the cap, which has no digests; 0 else.
	overCap int
}

// overCapMark starts the part of a packed content that stands for the digests of a source
// over the cap.
const overCapMark = "*"

// marked is the packed string as Transform stores it, behind cacheMark, in one allocation of
// its exact size: the cache keeps it, and would keep any spare capacity with it.
func (p packed) marked() string {
	n := len(cacheMark) + len(p.hash) + 1 + len(p.uidHash) + 1 + len(p.writer)
	for k, d := range p.digests {
		n += 2 + len(k) + len(d)
	}
	count := ""
	if p.overCap > 0 {
		count = strconv.Itoa(p.overCap)
		n += 1 + len(overCapMark) + len(count)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(cacheMark)
	b.WriteString(p.hash)
	b.WriteByte(' ')
	b.WriteString(p.uidHash)
	b.WriteByte(' ')
	b.WriteString(p.writer)
	if p.overCap > 0 {
		b.WriteByte(' ')
		b.WriteString(overCapMark)
		b.WriteString(count)
	}
	for _, k := range slices.Sorted(maps.Keys(p.digests)) {
		b.WriteByte(' ')
		b.WriteString(k)
		b.WriteByte(' ')
		b.WriteString(p.digests[k])
	}
	return b.String()
}

// cached returns the packed content Transform left in o, without its mark; ok is false for a
// full object.
func cached(o client.Object) (string, bool) {
	return strings.CutPrefix(o.GetSelfLink(), cacheMark)
}

// Packed returns the packed content Transform left in o (a cached source), as the cache holds
// it, without copying it; ok is false for a full object.
func Packed(o client.Object) (string, bool) { return cached(o) }

// PackedHash is the content hash a packed content starts with.
func PackedHash(p string) string {
	h, _, _ := cachedHashes(p)
	return h
}

// cachedHashes splits the hashes off a packed content; rest holds the key and digest pairs.
func cachedHashes(p string) (hash, uidHash, rest string) {
	hash, rest, _ = strings.Cut(p, " ")
	uidHash, rest, _ = strings.Cut(rest, " ")
	_, rest, _ = strings.Cut(rest, " ") // the writer: see entries
	return hash, uidHash, rest
}

// CachedHash is the content hash Transform packed into a cached source; empty for a full
// object. (Only the hash of a CSI mount of no objects is empty too, and that object, whose
// status the cache keeps, hashes to it again.)
func CachedHash(o client.Object) string {
	p, _ := cached(o)
	h, _, _ := cachedHashes(p)
	return h
}

// ContentHash reads a source's hash from a cached object, or computes it from a full one.
func (t SourceType) ContentHash(o client.Object) string {
	if h := CachedHash(o); h != "" {
		return h
	}
	return t.Hash(o)
}

// uidHash reads a Secret's UID-keyed hash from a cached object, or computes it from a full one.
func (t SourceType) uidHash(o client.Object) string {
	if t.UIDHash == nil {
		return ""
	}
	if p, ok := cached(o); ok {
		_, h, _ := cachedHashes(p)
		return h
	}
	return t.UIDHash(o)
}

// KeyDigestsOf reads the per-key digests Transform kept in a cached object, or computes them
// from a full one; nil for a source over the cap, never nil else.
func (t SourceType) KeyDigestsOf(o client.Object) map[string]string {
	p, ok := cached(o)
	if !ok {
		return t.KeyDigests(o)
	}
	return PackedDigests(p)
}

// PackedDigests reads the key and digest pairs of a packed content; nil for a source over the
// cap.
func PackedDigests(p string) map[string]string {
	_, _, rest := cachedHashes(p)
	if strings.HasPrefix(rest, overCapMark) {
		return nil
	}
	pairs := strings.Fields(rest)
	out := make(map[string]string, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		out[pairs[i]] = pairs[i+1]
	}
	return out
}

// OverCap returns the number of keys of a source over the cap (hash.MaxKeyDigests), whose
// per-key digests are not kept, read from a cached object or counted in a full one; ok is
// false for a source within it, or of a type without keys.
func (t SourceType) OverCap(o client.Object) (keys int, ok bool) {
	if t.KeyDigests == nil || o == nil {
		return 0, false
	}
	p, cachedObj := cached(o)
	if !cachedObj {
		if !overCap(o) {
			return 0, false
		}
		return keyCount(o), true
	}
	_, _, rest := cachedHashes(p)
	n, isOver := strings.CutPrefix(rest, overCapMark)
	if !isOver {
		return 0, false
	}
	keys, _ = strconv.Atoi(n)
	return keys, true
}

// overCap reports whether a full source has too many keys for per-key digests.
func overCap(o client.Object) bool {
	switch v := o.(type) {
	case *corev1.ConfigMap:
		return hash.ConfigMapOverCap(v)
	case *corev1.Secret:
		return hash.SecretOverCap(v)
	}
	return false
}

// keyCount is the number of keys of a full source.
func keyCount(o client.Object) int {
	switch v := o.(type) {
	case *corev1.ConfigMap:
		return len(v.Data) + len(v.BinaryData)
	case *corev1.Secret:
		return len(v.Data)
	}
	return 0
}

// HashOf returns the hash of a watched object as a workload observes its source: of the
// given keys when restricted, of the whole content otherwise; Absent for no object.
func (t SourceType) HashOf(o client.Object, keys []string, restricted bool) string {
	switch {
	case o == nil:
		return reload.Absent
	case restricted && t.KeyDigests != nil:
		return SubsetHash(t.ContentHash(o), t.KeyDigestsOf(o), keys)
	}
	return t.ContentHash(o)
}

// SubsetHash is the hash of some keys of a source whose whole content hashes to whole, from
// its per-key digests; of the whole content when it has none (over the cap).
func SubsetHash(whole string, digests map[string]string, keys []string) string {
	if digests == nil {
		return hash.SubsetOfWhole(whole, keys)
	}
	return hash.Subset(whole, digests, keys)
}

// SourceName names the source a watched object stands for.
func (t SourceType) SourceName(o client.Object) string {
	if t.Pool != nil {
		return t.Pool.SourceName(o)
	}
	return o.GetName()
}

// IndexValue is the pooled-source index function.
func (t SourceType) IndexValue(o client.Object) []string {
	if name := t.SourceName(o); name != "" {
		return []string{name}
	}
	return nil
}

// Snapshot is a source as one read sees it (SourceType.Get, SourceType.All).
type Snapshot struct {
	// obj is a watched object of the source, for Events; nil when the source is gone.
	obj         client.Object
	hash        string
	annotations map[string]string
	labels      map[string]string
	// uidHash is a Secret's hash in the UID-keyed scheme, to upgrade records made with it.
	uidHash string
}

// SnapshotOf is a source as a reader other than SourceType.Get saw it: a watched object of it
// (nil: gone), its content hash, its annotations and labels.
func SnapshotOf(obj client.Object, hash string, annotations, labels map[string]string) Snapshot {
	return Snapshot{obj: obj, hash: hash, annotations: annotations, labels: labels}
}

// AbsentSnapshot is a source that does not exist: its hash is reload.Absent.
func AbsentSnapshot() Snapshot { return Snapshot{hash: reload.Absent} }

// Object is a watched object of the source, for Events; nil when the source is gone.
func (s Snapshot) Object() client.Object { return s.obj }

// Hash is the source's content hash (for an Observed source, of the keys that concern the
// workload when restricted).
func (s Snapshot) Hash() string { return s.hash }

// Annotations and Labels are the source's own, as the cache keeps them.
func (s Snapshot) Annotations() map[string]string { return s.annotations }

// Labels: see Annotations.
func (s Snapshot) Labels() map[string]string { return s.labels }

// UIDHash is a Secret's hash in the UID-keyed scheme, to upgrade records made with it.
func (s Snapshot) UIDHash() string { return s.uidHash }

// Get reads one source; ok is false when it does not exist.
func (t SourceType) Get(ctx context.Context, c client.Reader, ns, name string) (Snapshot, bool, error) {
	if t.Pool != nil {
		list := t.NewList()
		if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingFields{IndexPooledSource: name}, client.UnsafeDisableDeepCopy); err != nil {
			return Snapshot{}, false, fmt.Errorf("list %s mounts in %s: %w", name, ns, err)
		}
		s, ok := t.pooled(list)[name]
		return s, ok, nil
	}
	o := t.NewObject()
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o)
	if apierrors.IsNotFound(err) {
		return Snapshot{}, false, nil
	}
	if err != nil {
		return Snapshot{}, false, fmt.Errorf("get %s %s/%s: %w", t.Kind, ns, name, err)
	}
	return t.snapshotOf(o), true, nil
}

// All reads every source of the kind in a namespace, by name.
func (t SourceType) All(ctx context.Context, c client.Reader, ns string) (map[string]Snapshot, error) {
	list := t.NewList()
	if err := c.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list %ss in %s: %w", t.Kind, ns, err)
	}
	if t.Pool != nil {
		return t.pooled(list), nil
	}
	out := map[string]Snapshot{}
	err := ForEach(list, func(o client.Object) {
		out[o.GetName()] = t.snapshotOf(o)
	})
	return out, err
}

func (t SourceType) snapshotOf(o client.Object) Snapshot {
	return Snapshot{obj: o, hash: t.ContentHash(o), annotations: o.GetAnnotations(), labels: o.GetLabels(), uidHash: t.uidHash(o)}
}

// pooled folds the objects of a pooled type into one snapshot per source.
func (t SourceType) pooled(list client.ObjectList) map[string]Snapshot {
	versions := map[string][]string{}
	first := map[string]client.Object{}
	_ = ForEach(list, func(o client.Object) {
		name := t.Pool.SourceName(o)
		if name == "" {
			return
		}
		versions[name] = append(versions[name], t.Pool.Versions(o)...)
		if first[name] == nil {
			first[name] = o
		}
	})
	out := make(map[string]Snapshot, len(versions))
	for name, v := range versions {
		out[name] = Snapshot{obj: first[name], hash: hash.Versions(v)}
	}
	return out
}

// Observed is one source that concerns a workload, as it is now.
type Observed struct {
	Snapshot
	Ref *source.Ref
	// Keys are the keys that concern the workload when Restricted (Rules.KeysOf); the hash
	// covers only them.
	Keys       []string
	Restricted bool
}

// Observe is a source as the workload sees it: restricted to some keys by the rules that make
// candidate c concern it, for reason why.
func (t SourceType) Observe(c reload.Candidate, why reload.Reason, s Snapshot, ref *source.Ref, rules *reload.Rules, spec *corev1.PodSpec) Observed {
	o := Observed{Snapshot: s, Ref: ref}
	if t.KeyDigests == nil {
		return o
	}
	if o.Keys, o.Restricted = rules.KeysFor(c, why, spec); o.Restricted {
		o.hash = t.HashOf(s.obj, o.Keys, true)
	}
	return o
}

// ObservedAs is watched object o as a workload that reads only keys of it observes it (the
// whole of it when keys is nil).
func (t SourceType) ObservedAs(o client.Object, keys []string) Observed {
	ob := Observed{Snapshot: t.snapshotOf(o), Keys: keys, Restricted: keys != nil}
	if keys != nil {
		ob.hash = t.HashOf(o, keys, true)
	}
	return ob
}

// CountEvents counts the watch events of the source informer in upstream's series; an update
// that leaves the content as it was is upstream's no_data_change skip, which upstream also
// counts as a reconcile with result "skipped" (its handler compares the hashes and stops).
func (t SourceType) CountEvents(u *metrics.Upstream) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { u.EventReceived(metrics.EventAdd, t.Resource) },
		UpdateFunc: func(oldObj, newObj any) {
			start := time.Now()
			o, okOld := oldObj.(client.Object)
			n, okNew := newObj.(client.Object)
			if okOld && okNew && o.GetResourceVersion() == n.GetResourceVersion() {
				// The cache's periodic resync, not a write: upstream's informers never
				// resync, so upstream never counts one.
				return
			}
			u.EventReceived(metrics.EventUpdate, t.Resource)
			if okOld && okNew && t.ContentHash(o) == t.ContentHash(n) {
				u.SkippedNoDataChange(time.Since(start))
			}
		},
		DeleteFunc: func(any) { u.EventReceived(metrics.EventDelete, t.Resource) },
	}
}

// ForEach calls fn with each object of list.
func ForEach(list client.ObjectList, fn func(client.Object)) error {
	return apimeta.EachListItem(list, func(o runtime.Object) error {
		if co, ok := o.(client.Object); ok {
			fn(co)
		}
		return nil
	})
}
