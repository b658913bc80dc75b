package reload

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/reloader-operator/reloader/internal/source"
)

// Annotations of per-key reloads, this project's own (upstream has none).
const (
	// UsedKeysOnlyAnnotation on a workload: "true" restricts each ConfigMap and Secret it
	// references to the keys its pod spec reads one by one (see source.UsedKeys).
	UsedKeysOnlyAnnotation = "reloader.dev/used-keys-only"
	// ConfigMapKeysAnnotation and SecretKeysAnnotation on a workload list "<name>/<key>"
	// entries: each named source is restricted to the keys listed for it.
	ConfigMapKeysAnnotation = "configmap.reloader.dev/keys"
	SecretKeysAnnotation    = "secret.reloader.dev/keys"
)

// keysAnnotations are the kinds that have keys, with their keys annotation.
var keysAnnotations = map[source.Kind]string{
	source.ConfigMap: ConfigMapKeysAnnotation,
	source.Secret:    SecretKeysAnnotation,
}

// KeysOf returns the keys of a source whose changes concern the workload; restricted is false
// when all of them do. An entry of the keys annotation for the source wins; otherwise, with
// used-keys-only, the keys the pod spec reads, unless it reads the source whole (envFrom, a
// volume without items) or not at all (a source only named in a reload annotation).
func (r *Rules) KeysOf(id source.ID, spec *corev1.PodSpec) (keys []string, restricted bool) {
	if keys, ok := r.KeyLists[id.Kind].Of(id.Name); ok {
		return keys, true
	}
	if _, hasKeys := keysAnnotations[id.Kind]; !hasKeys || !r.UsedKeysOnly {
		return nil, false
	}
	use, read := source.UsedKeys(spec)[id]
	if !read || use.Whole {
		return nil, false
	}
	return use.Keys, true
}

// KeyList is one parsed keys annotation: the keys listed for each source name. It is shared
// between workloads and never modified.
type KeyList struct {
	keys map[string][]string
	errs []error
	cost int
}

// Of returns the keys listed for a source, sorted; ok is false when it has no entry.
func (l *KeyList) Of(name string) (keys []string, ok bool) {
	if l == nil {
		return nil, false
	}
	keys, ok = l.keys[name]
	return keys, ok
}

// Len returns how many sources the list names.
func (l *KeyList) Len() int {
	if l == nil {
		return 0
	}
	return len(l.keys)
}

func (l *KeyList) size() int { return l.cost }

// parseKeyList parses a keys annotation value within the limits of the reload annotations
// (MaxValueBytes, MaxEntries). An entry that is not "<object name>/<valid key>" is reported
// and skipped; the others still apply.
func parseKeyList(v string) *KeyList {
	l := &KeyList{cost: 2*len(v) + 64}
	if len(v) > MaxValueBytes {
		l.errs = append(l.errs, fmt.Errorf("value is %d bytes, over the limit of %d; the whole annotation is ignored", len(v), MaxValueBytes))
		return l
	}
	if n := countEntries(v); n > MaxEntries {
		l.errs = append(l.errs, fmt.Errorf("value has %d entries, over the limit of %d; the whole annotation is ignored", n, MaxEntries))
		return l
	}
	rejected := 0
	for entry := range strings.SplitSeq(v, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		if err := checkKeyEntry(entry); err != nil {
			if rejected++; rejected <= maxReported {
				l.errs = append(l.errs, err)
			}
			continue
		}
		name, key, _ := strings.Cut(entry, "/")
		if l.keys == nil {
			l.keys = map[string][]string{}
		}
		l.keys[name] = append(l.keys[name], key)
	}
	if rejected > maxReported {
		l.errs = append(l.errs, fmt.Errorf("and %d more entries rejected", rejected-maxReported))
	}
	for name, keys := range l.keys {
		slices.Sort(keys)
		l.keys[name] = slices.Compact(keys)
	}
	return l
}

func checkKeyEntry(entry string) error {
	name, key, ok := strings.Cut(entry, "/")
	switch {
	case !ok:
		return fmt.Errorf("entry %q is not <name>/<key>", clip(entry))
	case len(validation.IsDNS1123Subdomain(name)) > 0:
		return fmt.Errorf("entry %q: %q is not an object name", clip(entry), clip(name))
	case len(validation.IsConfigMapKey(key)) > 0:
		return fmt.Errorf("entry %q: %q is not a valid key (letters, digits, '-', '_' and '.', at most %d characters)", clip(entry), clip(key), validation.DNS1123SubdomainMaxLength)
	}
	return nil
}
