package reload

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// manySources returns n ConfigMaps with names of 200 characters and their hashes.
func manySources(n int) map[source.ID]string {
	out := make(map[source.ID]string, n)
	for i := range n {
		out[source.ID{Kind: source.ConfigMap, Name: fmt.Sprintf("%s-%05d", strings.Repeat("c", 194), i)}] = fmt.Sprintf("%064x", i)
	}
	return out
}

// store encodes a record as reconcile writes it and parses it as the next one reads it.
func store(t *testing.T, r Record) Record {
	t.Helper()
	v := r.Encode()
	if len(v) > MaxRecordBytes {
		t.Fatalf("record of %d sources encodes to %d bytes, over %d", len(r), len(v), MaxRecordBytes)
	}
	got, err := ParseRecord(v)
	testutil.Must(t, err)
	return got
}

func TestRecordOfTenThousandSources(t *testing.T) {
	current := manySources(10000)
	_, next := Diff(nil, false, current, Events{})
	last := store(t, next)
	if !last.folded() {
		t.Fatal("10,000 sources stored unfolded")
	}
	if changed, _ := Diff(last, true, current, Events{}); len(changed) != 0 {
		t.Fatalf("nothing changed, but %d sources reload", len(changed))
	}

	// One change: reloaded once, with its bucket; then never again.
	ids := slices.SortedFunc(func(yield func(source.ID) bool) {
		for id := range current {
			if !yield(id) {
				return
			}
		}
	}, source.CompareIDs)
	one := ids[4321]
	current[one] = "changed"
	changed, next := Diff(last, true, current, Events{})
	if !slices.Contains(changed, one) || len(changed) > 100 {
		t.Fatalf("a change of %s reloads %d sources, it included: %v", one.Name, len(changed), slices.Contains(changed, one))
	}
	last = store(t, next)
	if changed, _ := Diff(last, true, current, Events{}); len(changed) != 0 {
		t.Fatalf("the same change reloads again: %d sources", len(changed))
	}

	// A new source is recorded only; a change beside it in its bucket still reloads.
	added := source.ID{Kind: source.ConfigMap, Name: "new-one"}
	current[added] = "h"
	if changed, next := Diff(last, true, current, Events{}); len(changed) != 0 {
		t.Fatalf("a new source reloads %d sources", len(changed))
	} else {
		last = store(t, next)
	}
	another := source.ID{Kind: source.ConfigMap, Name: "new-two"}
	var neighbour source.ID
	for _, id := range ids {
		if bucketOf(id.String()) == bucketOf(another.String()) {
			neighbour = id
			break
		}
	}
	current[another], current[neighbour] = "h", "changed too"
	changed, next = Diff(last, true, current, Events{})
	if !slices.Contains(changed, neighbour) || slices.Contains(changed, another) {
		t.Fatalf("a change beside a new source: reloads %v", changed)
	}
	last = store(t, next)

	// A source gone: the record can't tell a change from it, so its bucket reloads, once.
	delete(current, ids[0])
	changed, next = Diff(last, true, current, Events{})
	if len(changed) == 0 {
		t.Fatal("a bucket that lost a member reloads nothing; a change in it would be missed")
	}
	last = store(t, next)
	if changed, _ := Diff(last, true, current, Events{}); len(changed) != 0 {
		t.Fatalf("reloads again: %d sources", len(changed))
	}
}

func TestSmallRecordsStayExact(t *testing.T) {
	current := manySources(50)
	_, next := Diff(nil, false, current, Events{})
	if last := store(t, next); last.folded() || !last.Equal(next) {
		t.Fatal("a record of 50 sources was folded")
	}
	// Shrinking back below the limit unfolds the record.
	big := manySources(1000)
	_, next = Diff(nil, false, big, Events{})
	last := store(t, next)
	_, next = Diff(last, true, current, Events{})
	if last := store(t, next); last.folded() {
		t.Fatal("a record back to 50 sources stays folded")
	}
}

func TestFoldedKeepsSecretProviderClassesExact(t *testing.T) {
	current := manySources(1000)
	spc := source.ID{Kind: source.SecretProviderClass, Name: "vault"}
	current[spc] = "v1"
	_, next := Diff(nil, false, current, Events{})
	last := store(t, next)
	if last[spc.String()] != "v1" {
		t.Fatalf("secretproviderclass entry %q", last[spc.String()])
	}
}
