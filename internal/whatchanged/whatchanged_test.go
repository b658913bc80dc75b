package whatchanged

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDiff(t *testing.T) {
	before := map[string]string{"LOG_LEVEL": "d1", "OLD": "d2", "SAME": "d3"}
	after := map[string]string{"LOG_LEVEL": "d9", "NEW": "d4", "SAME": "d3"}
	for _, tc := range []struct {
		name                    string
		before, after           map[string]string
		only                    []string
		added, removed, changed []string
		text                    string
	}{
		{"all three", before, after, nil, []string{"NEW"}, []string{"OLD"}, []string{"LOG_LEVEL"},
			"keys changed: LOG_LEVEL; added: NEW; removed: OLD"},
		{"nothing", before, before, nil, nil, nil, nil, ""},
		{"created", nil, after, nil, []string{"LOG_LEVEL", "NEW", "SAME"}, nil, nil, "keys added: LOG_LEVEL, NEW, SAME"},
		{"deleted", before, nil, nil, nil, []string{"LOG_LEVEL", "OLD", "SAME"}, nil, "keys removed: LOG_LEVEL, OLD, SAME"},
		{"restricted", before, after, []string{"OLD", "SAME"}, nil, []string{"OLD"}, nil, "keys removed: OLD"},
		{"restricted to none", before, after, []string{}, nil, nil, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := Diff(tc.before, tc.after, tc.only)
			if !slices.Equal(k.Added, tc.added) || !slices.Equal(k.Removed, tc.removed) || !slices.Equal(k.Changed, tc.changed) {
				t.Errorf("added %v removed %v changed %v, want %v %v %v", k.Added, k.Removed, k.Changed, tc.added, tc.removed, tc.changed)
			}
			if got := k.String(); got != tc.text {
				t.Errorf("text %q, want %q", got, tc.text)
			}
			if k.Empty() != (tc.text == "") {
				t.Errorf("Empty() = %v for %q", k.Empty(), tc.text)
			}
		})
	}
}

// TestDiffBoundsNames: a change of 1,000 keys names MaxNamed of each list, sorted, and counts
// the rest.
func TestDiffBoundsNames(t *testing.T) {
	before, after := map[string]string{}, map[string]string{}
	for i := range 1000 {
		before[fmt.Sprintf("k%04d", i)] = "a"
		after[fmt.Sprintf("k%04d", i)] = "b"
		after[fmt.Sprintf("n%04d", i)] = "c"
	}
	k := Diff(before, after, nil)
	if len(k.Changed) != MaxNamed || k.NChanged != 1000 || len(k.Added) != MaxNamed || k.NAdded != 1000 {
		t.Fatalf("named %d of %d changed, %d of %d added", len(k.Changed), k.NChanged, len(k.Added), k.NAdded)
	}
	if k.Changed[0] != "k0000" || k.Changed[MaxNamed-1] != "k0009" {
		t.Errorf("not the first names in order: %v", k.Changed)
	}
	want := "keys changed: k0000, k0001, k0002, k0003, k0004, k0005, k0006, k0007, k0008, k0009 and 990 more; added: n0000, n0001, n0002, n0003, n0004, n0005, n0006, n0007, n0008, n0009 and 990 more"
	if got := k.String(); got != want {
		t.Errorf("text\n%s\nwant\n%s", got, want)
	}
}

func at(s string) *metav1.Time {
	tm, _ := time.Parse(time.RFC3339, s)
	return &metav1.Time{Time: tm}
}

func TestNewest(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    string
	}{
		{"none", nil, ""},
		{"newest by time", []metav1.ManagedFieldsEntry{
			{Manager: "kubectl-create", Operation: "Update", Time: at("2026-11-26T20:00:00Z")},
			{Manager: "team-a", Operation: "Apply", Time: at("2026-11-26T21:00:00Z")},
			{Manager: "helm", Operation: "Update", Time: at("2026-11-26T20:30:00Z")},
		}, "team-a (Apply) at 2026-11-26T21:00:00Z"},
		{"same second: the last listed", []metav1.ManagedFieldsEntry{
			{Manager: "a", Operation: "Update", Time: at("2026-11-26T21:00:00Z")},
			{Manager: "b", Operation: "Update", Time: at("2026-11-26T21:00:00Z")},
		}, "b (Update) at 2026-11-26T21:00:00Z"},
		{"subresource and unknown operation", []metav1.ManagedFieldsEntry{
			{Manager: "x", Operation: "Bogus", Subresource: "status", Time: at("2026-11-26T21:00:00Z")},
		}, "x at 2026-11-26T21:00:00Z"},
		{"no time", []metav1.ManagedFieldsEntry{{Manager: "x", Operation: "Update"}}, "x (Update)"},
		{"hostile", []metav1.ManagedFieldsEntry{{Manager: "evil\x1b]0;title\x07 <b>|x\n", Operation: "Update", Subresource: "st atus"}},
			"evil__0_title___b__x_ (Update of st_atus)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, _ := Newest(tc.entries)
			if got := w.String(); got != tc.want {
				t.Errorf("%q, want %q", got, tc.want)
			}
			back, ok := ParseToken(w.Token())
			if ok != (w.Manager != "") || back != w {
				t.Errorf("token %q read back as %+v, %v; want %+v", w.Token(), back, ok, w)
			}
		})
	}
}

// TestNewestBoundsHostileManager: a 10 KiB manager name full of control bytes and markup
// comes out at most MaxManager bytes of safe characters.
func TestNewestBoundsHostileManager(t *testing.T) {
	hostile := strings.Repeat("\x1b[2J\x00\u202e<@here> |", 10<<10/16)
	w, ok := Newest([]metav1.ManagedFieldsEntry{{Manager: hostile, Operation: "Update", Time: at("2026-11-26T21:00:00Z")}})
	if !ok || len(w.Manager) > MaxManager || len(w.Manager) == 0 {
		t.Fatalf("manager of %d bytes", len(w.Manager))
	}
	for i := 0; i < len(w.Manager); i++ {
		if !safe(w.Manager[i]) {
			t.Fatalf("unsafe byte %q in %q", w.Manager[i], w.Manager)
		}
	}
	if strings.ContainsAny(w.Token(), " \n") || strings.Count(w.Token(), tokenSep) != 3 {
		t.Errorf("token %q would break the cache's packed string", w.Token())
	}
}

func TestLabel(t *testing.T) {
	for in, want := range map[string]string{
		"kubectl-edit": "kubectl-edit", "helm": "helm", "external-secrets": "external-secrets",
		"cert-manager-certificates-issuing": "cert-manager", "team-a": LabelOther, "": LabelUnknown,
		strings.Repeat("x", MaxManager): LabelOther,
	} {
		if got := Label(in); got != want {
			t.Errorf("Label(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzParseToken: any string read as a token gives a bounded, safe Writer whose token reads
// back as itself.
func FuzzParseToken(f *testing.F) {
	f.Add("kubectl-edit|Update|1764190800|")
	f.Add("a|Apply||status")
	f.Add("|||")
	f.Add("x|y|-1|z")
	f.Fuzz(func(t *testing.T, s string) {
		w, ok := ParseToken(s)
		if !ok {
			return
		}
		if len(w.Manager) > MaxManager || len(w.Subresource) > maxSubresource || strings.ContainsAny(w.Token(), " \n\x1b") {
			t.Fatalf("%q: unbounded or unsafe %+v", s, w)
		}
		if back, ok := ParseToken(w.Token()); !ok || back != w {
			t.Fatalf("%q: token %q reads back as %+v, want %+v", s, w.Token(), back, w)
		}
	})
}

// FuzzNewest: whatever a tenant writes into managedFields, the writer is bounded and safe.
func FuzzNewest(f *testing.F) {
	f.Add("team-a", "Update", "", int64(1764190800))
	f.Add("\x1b]0;x\x07", "Apply", "status", int64(-5))
	f.Fuzz(func(t *testing.T, manager, op, sub string, secs int64) {
		tm := metav1.NewTime(time.Unix(secs, 0))
		w, ok := Newest([]metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationType(op), Subresource: sub, Time: &tm}})
		if !ok {
			return
		}
		for _, s := range []string{w.Manager, w.Subresource} {
			for i := 0; i < len(s); i++ {
				if !safe(s[i]) {
					t.Fatalf("unsafe %q", s)
				}
			}
		}
		if len(w.Manager) > MaxManager || len(w.Subresource) > maxSubresource {
			t.Fatalf("unbounded %+v", w)
		}
		if back, ok := ParseToken(w.Token()); !ok || back != w {
			t.Fatalf("token %q reads back as %+v, want %+v", w.Token(), back, w)
		}
	})
}
