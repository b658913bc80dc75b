package sourcecache

import (
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/whatchanged"
)

// writerToken is what the cache keeps of a full source object's managedFields (packed.writer):
// its newest believable entries, observed now (whatchanged.Pack).
func writerToken(o client.Object) string {
	return whatchanged.Pack(whatchanged.Entries(o.GetManagedFields(), time.Now()))
}

// entries are the managedFields entries a source kept: from a cached object, or a full one.
func entries(o client.Object) []whatchanged.Entry {
	p, ok := cached(o)
	if !ok {
		return whatchanged.Entries(o.GetManagedFields(), time.Now())
	}
	_, rest, _ := strings.Cut(p, " ")
	_, rest, _ = strings.Cut(rest, " ")
	token, _, _ := strings.Cut(rest, " ")
	return whatchanged.Unpack(token)
}

// Writer reads the newest writer of a source from a cached object, or from a full one.
func (t SourceType) Writer(o client.Object) (whatchanged.Writer, bool) {
	return whatchanged.Pick(nil, entries(o))
}

// ChangeWriter is the writer of the write that turned old into cur: the manager whose entry
// it changed (whatchanged.Pick), copied out of the cache's strings.
func ChangeWriter(old, cur client.Object) (whatchanged.Writer, bool) {
	before := entries(old)
	if before == nil {
		before = []whatchanged.Entry{}
	}
	w, ok := whatchanged.Pick(before, entries(cur))
	w.Manager, w.Subresource = strings.Clone(w.Manager), strings.Clone(w.Subresource)
	return w, ok
}
