package sourcecache

import (
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/termsafe"
)

// ReasonKeysOverCap is the reason of the Event on a source whose keys are too many to digest
// one by one (hash.MaxKeyDigests).
const ReasonKeysOverCap = "KeysOverCap"

// Announcements of sources over the cap: one Event on the source and one log line per
// version of it, whichever workload controller's watch sees it first, and at most
// overCapRate a second beyond a burst of overCapBurst across the install, so that a tenant
// who writes such sources in a loop costs reloader a bounded number of API writes.
const (
	overCapRate  = 5
	overCapBurst = 30
	// overCapTold bounds the sources whose announced version is remembered; past it one is
	// forgotten, and may be announced again at its next sighting.
	overCapTold = 4096
)

// OverCapNotices announces the sources over the cap. The zero value announces nothing.
type OverCapNotices struct {
	// Recorder writes the Events; nil writes none.
	Recorder recorder.EventRecorder
	Log      logr.Logger

	mu         sync.Mutex
	told       map[sourceKey]string
	limit      *rate.Limiter
	suppressed int
}

// Observe announces o, a cached source of type st, when it is over the cap and its version
// was not announced yet.
func (n *OverCapNotices) Observe(st SourceType, o client.Object) {
	if n == nil || st.Pool != nil {
		return
	}
	keys, over := st.OverCap(o)
	k := sourceKey{o.GetNamespace(), source.ID{Kind: st.Kind, Name: o.GetName()}}
	n.mu.Lock()
	if !over {
		delete(n.told, k) // back within the cap: a later crossing is told again
		n.mu.Unlock()
		return
	}
	if n.told[k] == o.GetResourceVersion() {
		n.mu.Unlock()
		return
	}
	if n.limit == nil {
		n.limit = rate.NewLimiter(overCapRate, overCapBurst)
	}
	if !n.limit.AllowN(time.Now(), 1) {
		n.suppressed++
		n.mu.Unlock()
		return
	}
	if n.told == nil {
		n.told = map[sourceKey]string{}
	}
	if _, known := n.told[k]; !known && len(n.told) >= overCapTold {
		for old := range n.told {
			delete(n.told, old)
			break
		}
	}
	n.told[k] = o.GetResourceVersion()
	suppressed := n.suppressed
	n.suppressed = 0
	n.mu.Unlock()

	n.Log.Info("source over the per-key cap: only its whole content is hashed; reloads name none of its keys, and workloads that use only some of its keys reload on any change of it",
		"kind", st.Kind.Title(), "namespace", o.GetNamespace(), "name", o.GetName(), "resourceVersion", o.GetResourceVersion(),
		"keys", keys, "maxKeys", hash.MaxKeyDigests, "maxDigestBytes", hash.MaxKeyDigestBytes, "noticesSuppressed", suppressed)
	if n.Recorder == nil {
		return
	}
	note := overCapNote(st.Kind, keys)
	n.Recorder.Eventf(overCapRef(st.Kind, o), nil, corev1.EventTypeWarning, ReasonKeysOverCap, "Hash", "%s", termsafe.ClipNote(note))
}

// Forget drops what was told of a deleted source.
func (n *OverCapNotices) Forget(ns string, id source.ID) {
	if n == nil {
		return
	}
	n.mu.Lock()
	delete(n.told, sourceKey{ns, id})
	n.mu.Unlock()
}

func overCapNote(kind source.Kind, keys int) string {
	return fmt.Sprintf("%s has %d keys, more than reloader digests one by one (%d keys, or %d KiB of key names and digests): "+
		"reloader keeps only the hash of its whole content, so its reloads name none of its keys, "+
		"and workloads that reload on some of its keys only (%s, %s, %s) reload on any change of it",
		kind.Title(), keys, hash.MaxKeyDigests, hash.MaxKeyDigestBytes>>10,
		reload.ConfigMapKeysAnnotation, reload.SecretKeysAnnotation, reload.UsedKeysOnlyAnnotation)
}

// overCapRef names the source an Event is about: a ConfigMap with its UID (kubectl describe
// selects on it), a Secret without (Events are readable by the view role, and a Secret's UID
// keyed Secret hashes before the install key: see relatedRef in internal/controller).
func overCapRef(kind source.Kind, o client.Object) *corev1.ObjectReference {
	ref := &corev1.ObjectReference{APIVersion: "v1", Kind: kind.Title(), Namespace: o.GetNamespace(), Name: o.GetName()}
	if kind == source.ConfigMap {
		ref.UID = o.GetUID()
	}
	return ref
}

// sourceKey names a source within its namespace.
type sourceKey struct {
	namespace string
	id        source.ID
}
