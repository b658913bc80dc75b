package reload

import (
	"testing"
	"time"

	"github.com/reloader-operator/reloader/internal/source"
)

// TestCachesAreOwned: what one Caches parsed serves its own callers only; another (a second
// manager in the process) parses for itself, and without Caches every call parses.
func TestCachesAreOwned(t *testing.T) {
	keys := DefaultKeys()
	meta := map[string]string{keys.Reload[source.ConfigMap]: "app.config,feature-.*", ReloadWindowAnnotation: "daily 02:00-04:00 Europe/Berlin"}
	a, b := NewCaches(), NewCaches()
	ra1, _ := a.ParseRules(keys, meta, nil)
	ra2, _ := a.ParseRules(keys, meta, nil)
	rb, _ := b.ParseRules(keys, meta, nil)
	if ra1.Named[source.ConfigMap] != ra2.Named[source.ConfigMap] {
		t.Error("one Caches parsed the same value twice")
	}
	if rb.Named[source.ConfigMap] == ra1.Named[source.ConfigMap] {
		t.Error("two Caches share a parse")
	}
	n1, _ := ParseRules(keys, meta, nil)
	n2, _ := ParseRules(keys, meta, nil)
	if n1.Named[source.ConfigMap] == n2.Named[source.ConfigMap] {
		t.Error("ParseRules without Caches memoized a parse")
	}
	if a.rules.len() != 1 || b.rules.len() != 1 {
		t.Errorf("caches hold %d and %d values, want 1 each", a.rules.len(), b.rules.len())
	}

	w1, err := a.ParseReloadWindows(meta[ReloadWindowAnnotation])
	if err != nil {
		t.Fatal(err)
	}
	w2, _ := a.ParseReloadWindows(meta[ReloadWindowAnnotation])
	if w1[0].loc != w2[0].loc {
		t.Error("one Caches loaded a time zone twice")
	}
	if _, ok := b.zones.Load("Europe/Berlin"); ok {
		t.Error("a zone loaded through one Caches is in another")
	}
	if _, err := a.ParseReloadWindows("daily 02:00-04:00 Mars/Olympus"); err == nil {
		t.Error("an unknown zone parsed")
	}
	if _, ok := a.zones.Load("Mars/Olympus"); ok {
		t.Error("an unknown zone was cached")
	}
	s := HoldState{Window: "daily 02:00-04:00 Asia/Tokyo", HasWindow: true, Caches: b}
	PlanHold(s, time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	if _, ok := b.zones.Load("Asia/Tokyo"); !ok {
		t.Error("PlanHold did not load the window's zone through its Caches")
	}
}
