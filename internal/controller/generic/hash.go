package generic

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
)

// content is what one reconcile read of a config's sources chosen by name.
type content struct {
	// hash combines the sources' hashes; "<key id>:<hex>" when a Secret's hash is keyed.
	hash string
	// changes are the sources with their hashes (reload.Absent: missing), for the gates.
	changes []reload.Change
	// objects are the sources read, by source; a missing one has none.
	objects map[source.ID]client.Object
}

// sourcesHash reads, live, the config's sources chosen by name and hashes each as the
// workloads' do (SourceType.Hash: a Secret under the install's HMAC key, never a plain
// digest of its data; hash.Subset for listed keys), then combines them; a missing source
// counts as absent. A source type not read (--resources-to-ignore) is left out.
func (r *Reconciler) sourcesHash(ctx context.Context, cfg *v1alpha1.ReloaderConfig) (content, error) {
	c := content{objects: map[source.ID]client.Object{}}
	h := sha256.New()
	keyID := ""
	for _, s := range cfg.Spec.Sources[:min(len(cfg.Spec.Sources), v1alpha1.MaxSources)] {
		st, ok := r.sourceType(s.Kind)
		if s.Name == "" || !ok {
			continue
		}
		id := source.ID{Kind: st.Kind, Name: s.Name}
		obj := st.NewObject()
		sum := reload.Absent
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: s.Name}, obj)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return content{}, fmt.Errorf("get %s %s/%s: %w", s.Kind, cfg.Namespace, s.Name, err)
		default:
			if st.Ready != nil {
				if err := st.Ready(); err != nil {
					return content{}, fmt.Errorf("hash %s %s/%s: %w", s.Kind, cfg.Namespace, s.Name, err)
				}
			}
			sum = st.Hash(obj)
			if len(s.Keys) > 0 && st.KeyDigests != nil {
				sum = hash.Subset(sum, st.KeyDigests(obj), s.Keys)
			}
			if id, keyed := hash.KeyID(sum); keyed && keyID == "" {
				keyID = id
			}
			c.objects[id] = obj
		}
		c.changes = append(c.changes, reload.Change{ID: id, Hash: sum})
		fmt.Fprintf(h, "%s\x00%s\x00", id, sum)
	}
	c.hash = hex.EncodeToString(h.Sum(nil))
	if keyID != "" {
		c.hash = keyID + ":" + c.hash
	}
	return c, nil
}

// sourceType is how a config's source kind ("ConfigMap", "Secret") is read: the manager's
// type of it, keyed as for workloads.
func (r *Reconciler) sourceType(kind string) (sourcecache.SourceType, bool) {
	for _, st := range r.Sources {
		if st.Pool == nil && strings.EqualFold(string(st.Kind), kind) {
			return st, true
		}
	}
	return sourcecache.SourceType{}, false
}

// rekeyed tells whether recorded was made under another install key than current: then the
// difference says nothing of the content, and the record is taken anew without a reload.
func rekeyed(recorded, current string) bool {
	return keyOf(recorded) != keyOf(current)
}

func keyOf(h string) string {
	if id, keyed := hash.KeyID(h); keyed {
		return id
	}
	return ""
}
