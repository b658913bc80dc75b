package reload

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// FuzzParseRules checks, for any reload and exclude annotation values, that parsing stays
// within its limits and that the source index (ScanNamed) finds every workload a name
// concerns.
func FuzzParseRules(f *testing.F) {
	for _, seed := range [][3]string{
		{"app-config,feature-.*", "app-config", "cfg"},
		{"app.config", "", "app-config"},
		{" a , b,,c-[0-9]+ ", "a.b,c-.*", "c-1"},
		{"bad-[,ok", "x", "ok"},
		{"a{1000}b{1000},(?:(?:[a-z0-9]{30}){30})", "", "aaa"},
		{strings.Repeat("p-.*,", 40), "", "p-1"},
		{strings.Repeat("a,", 300), "", "a"},
		{"(?i)APP,\\Qa.b\\E,[[:alpha:]]+", "", "a.b"},
		{"\x00,\xff,é", "é", "é"},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	keys := DefaultKeys()
	f.Fuzz(func(t *testing.T, reloadValue, excludeValue, name string) {
		meta := map[string]string{keys.Reload[source.ConfigMap]: reloadValue, keys.Exclude[source.ConfigMap]: excludeValue}
		r, errs := ParseRules(keys, meta, nil)
		named := r.Named[source.ConfigMap]
		if named.Patterns() > MaxPatterns || len(named.Literals()) > MaxEntries || len(errs) > 2*(maxReported+2) {
			t.Fatalf("past the limits: %d patterns, %d names, %d errors", named.Patterns(), len(named.Literals()), len(errs))
		}
		for _, l := range append(slices.Clone(named.Literals()), r.Exclude[source.ConfigMap].Literals()...) {
			if len(validation.IsDNS1123Subdomain(l)) > 0 {
				t.Fatalf("literal %q is no object name", l)
			}
		}
		if r.Exclude[source.ConfigMap].Patterns() > 0 {
			t.Fatal("an exclude list holds a pattern")
		}
		if len(reloadValue) <= MaxValueBytes && len(errs) == 0 && strings.TrimSpace(strings.ReplaceAll(reloadValue, ",", "")) != "" && named.Empty() {
			t.Fatalf("value %q without errors kept nothing", reloadValue)
		}
		scanned := ScanNamed(keys, meta, nil)[source.ConfigMap]
		if !slices.Equal(scanned.Literal, named.Literals()) || (named.Patterns() > 0 && !scanned.Patterns) {
			t.Fatalf("index %+v disagrees with rules: %v and %d patterns", scanned, named.Literals(), named.Patterns())
		}
		if named.Match(name) && !slices.Contains(scanned.Literal, name) && !scanned.Patterns {
			t.Fatalf("%q is named but the index would not find the workload", name)
		}
		for _, l := range named.Literals() {
			if !named.Match(l) {
				t.Fatalf("literal %q does not match itself", l)
			}
		}
	})
}

// FuzzRecord checks the record annotation: any value parses or is refused without panic, what
// parses encodes back to itself (or to its folded form, within MaxRecordBytes), and a record
// stored for some sources reports no change for the same sources.
func FuzzRecord(f *testing.F) {
	f.Add(`{"configmap/a":"1","secret/b":"k1:2"}`, "a\nb\nc", 1)
	f.Add(`{"~17":"00000000000000ff.0000000000000001","secretproviderclass/v":"x"}`, "v", 2)
	f.Add(`{"~17":"zz"}`, "", 0)
	f.Add(`not json`, "x", 1)
	f.Add(`{"configmap/a":""}`, "a", 3000)
	f.Fuzz(func(t *testing.T, value, names string, copies int) {
		if r, err := ParseRecord(value); err == nil {
			_, _ = Diff(r, true, map[source.ID]string{{Kind: source.ConfigMap, Name: "a"}: "1"}, Events{OnCreate: true, OnDelete: true})
			enc := r.Encode()
			back, err := ParseRecord(enc)
			if err != nil {
				t.Fatalf("%q encodes to %q, which does not parse: %v", value, enc, err)
			}
			if !r.folded() && len(enc) <= MaxRecordBytes && !back.Equal(r) {
				t.Fatalf("round trip of %v gives %v", r, back)
			}
			if enc != back.Encode() {
				t.Fatalf("encoding is not stable: %q then %q", enc, back.Encode())
			}
		}
		current := map[source.ID]string{}
		kinds := []source.Kind{source.ConfigMap, source.Secret, source.SecretProviderClass}
		for i := range min(max(copies, 1), 5000) {
			for j, n := range strings.Split(names, "\n") {
				current[source.ID{Kind: kinds[(i+j)%3], Name: fmt.Sprintf("%s-%d", n, i)}] = fmt.Sprintf("%x", (i*31+j)%7)
			}
		}
		_, next := Diff(nil, false, current, Events{})
		enc := next.Encode()
		stored, err := ParseRecord(enc)
		testutil.Must(t, err)
		if len(enc) > MaxRecordBytes && len(enc) > len(next.fold().Encode()) {
			t.Fatalf("%d sources stored in %d bytes", len(current), len(enc))
		}
		if changed, _ := Diff(stored, true, current, Events{OnCreate: true, OnDelete: true}); len(changed) != 0 {
			t.Fatalf("nothing changed, yet %d sources reload (folded %v)", len(changed), stored.folded())
		}
	})
}
