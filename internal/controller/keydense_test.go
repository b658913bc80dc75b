package controller_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// keyDenseKeys and keyDenseName make a ConfigMap of 1.35 MB of keys of 39 characters and empty
// values (45 bytes a key in JSON). Not the 150,000 keys of 9 bytes that cost the cache most
// (5.5 MB each; TestOverCapSourceKeepsTheWholeHashOnly caches one): the API server stores
// such a ConfigMap in time that grows faster than its keys (30,000: half a second; 60,000:
// ten seconds on a loaded machine; 150,000: past its one-minute timeout). Per-key digests
// made these 2.2 MB each in the cache.
const keyDenseKeys = 30000

const keyAlphabet = "-_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

func keyDenseName(i int) string {
	b := []byte{keyAlphabet[i%len(keyAlphabet)]}
	for i /= len(keyAlphabet); i > 0; i /= len(keyAlphabet) {
		b = append(b, keyAlphabet[i%len(keyAlphabet)])
	}
	return strings.Repeat("k", 39-len(b)) + string(b)
}

func keyDenseConfigMap(ns, name string) *corev1.ConfigMap {
	cm := configMap(ns, name, make(map[string]string, keyDenseKeys))
	for i := range keyDenseKeys {
		cm.Data[keyDenseName(i)] = ""
	}
	return cm
}

// writeDense creates cm, or with change, updates it so. A write of 150,000 keys takes the API
// server seconds on a loaded machine, and may time out after it was stored: it is made again
// until it is seen done.
func writeDense(t *testing.T, cm *corev1.ConfigMap, change func(*corev1.ConfigMap)) {
	t.Helper()
	ctx := context.Background()
	var rv string
	testutil.EventuallyWithin(t, 5*time.Minute, "write "+cm.Name, func() error {
		if change == nil {
			err := k8s.Create(ctx, cm.DeepCopy())
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		}
		cur := &corev1.ConfigMap{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(cm), cur); err != nil {
			return err
		}
		if rv != "" && cur.ResourceVersion != rv {
			return nil // the write timed out, but was stored
		}
		rv = cur.ResourceVersion
		change(cur)
		return k8s.Update(ctx, cur)
	})
}

// heapInUse is the heap of the test process, reloader's cache included, after a collection.
func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestKeyDenseSourcesAreCachedAsHashes: 20 ConfigMaps of 30,000 keys each (1.35 MB, 27 MB in
// all) cost reloader's cache at most 16 MiB (per-key digests made them 2.2 MB each),
// each is announced by a KeysOverCap Event, and a change of one of them still rolls a
// Deployment that reloads on one of its keys only: a change of another key, as reloader no
// longer tells its keys apart.
func TestKeyDenseSourcesAreCachedAsHashes(t *testing.T) {
	const sources = 20
	ns := newNamespace(t)
	startReloader(t, ns)
	before := heapInUse()

	for i := range sources {
		writeDense(t, keyDenseConfigMap(ns, fmt.Sprintf("dense-%d", i)), nil)
	}
	read := keyDenseName(1)
	d := deployment(ns, "web", map[string]string{auto: "true", reload.ConfigMapKeysAnnotation: "dense-0/" + read}, podSpec("dense-0"))
	create(t, d)
	recorded(t, d)
	// The positive sign that reloader's watches saw every source: an Event about each.
	testutil.Eventually(t, "a KeysOverCap Event on each source", func() error {
		var list eventsv1.EventList
		if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		var about []string
		for _, e := range list.Items {
			if e.Reason == sourcecache.ReasonKeysOverCap && e.Regarding.Kind == "ConfigMap" {
				about = append(about, e.Regarding.Name)
			}
		}
		slices.Sort(about)
		if about = slices.Compact(about); len(about) != sources {
			return fmt.Errorf("Events about %d sources: %v", len(about), about)
		}
		return nil
	})
	after := heapInUse()
	grown := int64(after) - int64(before)
	t.Logf("heap before the sources %d MiB, after %d MiB: %+d KiB for %d sources of %d keys", before>>20, after>>20, grown>>10, sources, keyDenseKeys)
	if grown > 16<<20 {
		t.Errorf("reloader's heap grew by %d MiB for %d key-dense sources, want at most 16 MiB", grown>>20, sources)
	}

	changes := templateChanges(t, d)
	writeDense(t, keyDenseConfigMap(ns, "dense-0"), func(c *corev1.ConfigMap) { c.Data[keyDenseName(keyDenseKeys-1)] = "changed" })
	waitChanges(t, "web", changes, 1, d)
	v, _ := envOf(&get(t, d).Spec.Template, "app", "STAKATER_DENSE_0_CONFIGMAP")
	if v == "" {
		t.Errorf("no hash of dense-0 in the template after the reload")
	}
	eventuallyEvent(t, ns, "dense-0", sourcecache.ReasonKeysOverCap)
}
