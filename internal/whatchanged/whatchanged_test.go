package whatchanged

import (
	"encoding/json"
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

// observed is when the tests' sources are seen: 21:01 on the day their entries were written.
var observed = time.Date(2026, 11, 26, 21, 1, 0, 0, time.UTC)

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
		}, "team-a (Apply at 2026-11-26T21:00:00Z)"},
		{"same second: the last listed", []metav1.ManagedFieldsEntry{
			{Manager: "a", Operation: "Update", Time: at("2026-11-26T21:00:00Z")},
			{Manager: "b", Operation: "Update", Time: at("2026-11-26T21:00:00Z")},
		}, "b (Update at 2026-11-26T21:00:00Z)"},
		{"subresource and unknown operation", []metav1.ManagedFieldsEntry{
			{Manager: "x", Operation: "Bogus", Subresource: "status", Time: at("2026-11-26T21:00:00Z")},
		}, "x (at 2026-11-26T21:00:00Z)"},
		{"no time", []metav1.ManagedFieldsEntry{{Manager: "x", Operation: "Update"}}, "x (Update)"},
		{"hostile", []metav1.ManagedFieldsEntry{{Manager: "evil\x1b]0;title\x07 <b>|x\n", Operation: "Update", Subresource: "st atus"}},
			"evil__0_title___b__x_ (Update of st_atus)"},
		{"future-dated: not believed, behind the dated", []metav1.ManagedFieldsEntry{
			{Manager: "security-bot", Operation: "Update", Time: at("2999-01-01T00:00:00Z")},
			{Manager: "real-writer", Operation: "Update", Time: at("2026-11-26T21:00:00Z")},
		}, "real-writer (Update at 2026-11-26T21:00:00Z)"},
		{"future-dated alone: no time", []metav1.ManagedFieldsEntry{
			{Manager: "security-bot", Operation: "Update", Time: at("2026-11-26T21:05:00Z")},
		}, "security-bot (Update)"},
		{"within the skew: believed", []metav1.ManagedFieldsEntry{
			{Manager: "a", Operation: "Update", Time: at("2026-11-26T21:00:00Z")},
			{Manager: "b", Operation: "Update", Time: at("2026-11-26T21:01:30Z")},
		}, "b (Update at 2026-11-26T21:01:30Z)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, _ := Newest(tc.entries, observed)
			if got := w.Short(); got != tc.want {
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
	w, ok := Newest([]metav1.ManagedFieldsEntry{{Manager: hostile, Operation: "Update", Time: at("2026-11-26T21:00:00Z")}}, observed)
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
		w, ok := Newest([]metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationType(op), Subresource: sub, Time: &tm}}, observed)
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

// entry is a managedFields entry of manager, written at t, owning fields.
func entry(manager, t, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: "Update", APIVersion: "v1", Time: at(t),
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
}

// TestPickTheEntryTheWriteChanged: the writer of a change is the manager whose entry the
// write changed, as the cache keeps entries (packed and read back), whatever entries written
// by hand claim: a "2999" entry, one dated within the skew, one out of order.
func TestPickTheEntryTheWriteChanged(t *testing.T) {
	forged := entry("security-bot", "2999-01-01T00:00:00Z", `{"f:data":{}}`)
	creator := entry("kubectl-create", "2026-11-26T20:00:00Z", `{"f:data":{"f:a":{}}}`)
	for _, tc := range []struct {
		name          string
		before, after []metav1.ManagedFieldsEntry
		want          string
	}{
		{"2999 entry, then a write by real-writer",
			[]metav1.ManagedFieldsEntry{creator, forged},
			[]metav1.ManagedFieldsEntry{creator, forged, entry("real-writer", "2026-11-26T21:00:00Z", `{"f:data":{"f:b":{}}}`)},
			"field manager real-writer (Update at 2026-11-26T21:00:00Z, reported by the API server)"},
		{"an entry dated within the skew loses to the one the write changed",
			[]metav1.ManagedFieldsEntry{creator, entry("near-future", "2026-11-26T21:01:50Z", `{}`), entry("real-writer", "2026-11-26T20:30:00Z", `{"f:data":{"f:b":{}}}`)},
			[]metav1.ManagedFieldsEntry{creator, entry("near-future", "2026-11-26T21:01:50Z", `{}`), entry("real-writer", "2026-11-26T21:00:00Z", `{"f:data":{"f:b":{}}}`)},
			"field manager real-writer (Update at 2026-11-26T21:00:00Z, reported by the API server)"},
		{"the same manager, its field set changed in the same second",
			[]metav1.ManagedFieldsEntry{entry("a", "2026-11-26T21:00:00Z", `{"f:data":{}}`), entry("b", "2026-11-26T21:00:00Z", `{}`)},
			[]metav1.ManagedFieldsEntry{entry("a", "2026-11-26T21:00:00Z", `{"f:data":{"f:x":{}}}`), entry("b", "2026-11-26T21:00:00Z", `{}`)},
			"field manager a (Update at 2026-11-26T21:00:00Z, reported by the API server)"},
		{"out of order: a changed entry dated before the newest one before is named without a time",
			[]metav1.ManagedFieldsEntry{creator, entry("real-writer", "2026-11-26T21:00:00Z", `{}`)},
			[]metav1.ManagedFieldsEntry{entry("backdated", "2026-11-26T19:00:00Z", `{}`), creator, entry("real-writer", "2026-11-26T21:00:00Z", `{}`)},
			"field manager backdated (Update, reported by the API server)"},
		{"no entry changed: the newest believable",
			[]metav1.ManagedFieldsEntry{creator, forged},
			[]metav1.ManagedFieldsEntry{creator, forged},
			"field manager kubectl-create (Update at 2026-11-26T20:00:00Z, reported by the API server)"},
		{"before unknown: the newest believable",
			nil,
			[]metav1.ManagedFieldsEntry{creator, forged},
			"field manager kubectl-create (Update at 2026-11-26T20:00:00Z, reported by the API server)"},
		{"forged entries pad the list: the changed one is still kept",
			[]metav1.ManagedFieldsEntry{forged, forged, forged, forged, creator},
			[]metav1.ManagedFieldsEntry{forged, forged, forged, forged, creator, entry("real-writer", "2026-11-26T21:00:00Z", `{}`)},
			"field manager real-writer (Update at 2026-11-26T21:00:00Z, reported by the API server)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before []Entry
			if tc.before != nil {
				before = Unpack(Pack(Entries(tc.before, observed)))
			}
			after := Unpack(Pack(Entries(tc.after, observed)))
			w, ok := Pick(before, after)
			if got := w.String(); !ok || got != tc.want {
				t.Errorf("%q, %v; want %q", got, ok, tc.want)
			}
		})
	}
}

// TestEntriesKeepTheNewest: of many entries, the MaxKept newest believable ones are kept,
// in their listed order, and come back from the cache's word as they went in.
func TestEntriesKeepTheNewest(t *testing.T) {
	var mf []metav1.ManagedFieldsEntry
	for i := range 300 {
		mf = append(mf, entry(fmt.Sprintf("m%03d", i), time.Date(2026, 11, 26, 20, 0, i%60, 0, time.UTC).Format(time.RFC3339), `{}`))
	}
	mf = append(mf, entry("future", "2999-01-01T00:00:00Z", `{}`))
	es := Entries(mf, observed)
	var names []string
	for _, e := range es {
		names = append(names, e.Manager)
	}
	// Only the first 256 entries are read; of those, the newest are at second 59, and among
	// them the last listed win (m119, m179, m239; m059 is dropped).
	if want := []string{"m119", "m179", "m239"}; !slices.Equal(names, want) {
		t.Errorf("kept %v, want %v", names, want)
	}
	if back := Unpack(Pack(es)); !slices.Equal(back, es) {
		t.Errorf("read back %+v, want %+v", back, es)
	}
	for _, bad := range []string{"", ",", "a|Update|1|", "a|Update|1||zz", "|Update|1||1", "a|Update|x||1"} {
		if es := Unpack(bad); len(es) != 0 {
			t.Errorf("Unpack(%q) = %+v", bad, es)
		}
	}
}

// TestWriterSaysWhoReportsIt: every description of a writer says whose word it is, the JSON
// form too.
func TestWriterSaysWhoReportsIt(t *testing.T) {
	w := Writer{Manager: "real-writer"}
	if got := w.String(); got != "field manager real-writer (reported by the API server)" {
		t.Errorf("String() = %q", got)
	}
	b, err := json.Marshal(Writer{Manager: "m", Operation: "Apply", Time: time.Date(2026, 11, 26, 21, 0, 0, 0, time.UTC)})
	if want := `{"manager":"m","operation":"Apply","time":"2026-11-26T21:00:00Z","reportedBy":"managedFields"}`; err != nil || string(b) != want {
		t.Errorf("JSON %s, %v; want %s", b, err, want)
	}
}
