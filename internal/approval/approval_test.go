package approval

import (
	"strings"
	"testing"
	"time"

	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
)

var (
	cm  = source.ID{Kind: source.ConfigMap, Name: "app"}
	sec = source.ID{Kind: source.Secret, Name: "creds"}
)

func TestModeResolution(t *testing.T) {
	changes := []reload.Change{{ID: cm, Hash: "h1"}, {ID: sec, Hash: "h2"}}
	tests := []struct {
		name     string
		workload map[string]string
		sources  map[source.ID]map[string]string
		dflt     Mode
		want     Mode
		invalid  int
	}{
		{name: "nothing set: the default", dflt: Reload, want: Reload},
		{name: "the flag's default", dflt: Notify, want: Notify},
		{name: "the workload's annotation wins over everything",
			workload: map[string]string{ModeAnnotation: "notify"},
			sources:  map[source.ID]map[string]string{cm: {ModeAnnotation: "approve"}},
			dflt:     Approve, want: Notify},
		{name: "a source's annotation wins over the default",
			sources: map[source.ID]map[string]string{cm: {ModeAnnotation: "approve"}, sec: {ModeAnnotation: "approve"}},
			dflt:    Reload, want: Approve},
		{name: "of several sources, approve wins",
			sources: map[source.ID]map[string]string{cm: {ModeAnnotation: "notify"}, sec: {ModeAnnotation: "approve"}},
			dflt:    Reload, want: Approve},
		{name: "of several sources, reload wins over notify: the roll loads both",
			sources: map[source.ID]map[string]string{cm: {ModeAnnotation: "notify"}},
			dflt:    Reload, want: Reload},
		{name: "every source notify: notify",
			sources: map[source.ID]map[string]string{cm: {ModeAnnotation: " notify "}, sec: {ModeAnnotation: "notify"}},
			dflt:    Reload, want: Notify},
		{name: "a bad workload annotation: the next less specific setting, reported",
			workload: map[string]string{ModeAnnotation: "roll"},
			sources:  map[source.ID]map[string]string{cm: {ModeAnnotation: "approve"}},
			dflt:     Reload, want: Approve, invalid: 1},
		{name: "a bad source annotation: the default for that source, reported",
			sources: map[source.ID]map[string]string{cm: {ModeAnnotation: strings.Repeat("x", 10000)}, sec: {ModeAnnotation: "notify"}},
			dflt:    Approve, want: Approve, invalid: 1},
		{name: "both bad: the default, both reported",
			workload: map[string]string{ModeAnnotation: ""},
			sources:  map[source.ID]map[string]string{cm: {ModeAnnotation: "APPROVE"}},
			dflt:     Notify, want: Notify, invalid: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := Resolve(tt.workload, changes, func(ch reload.Change) map[string]string { return tt.sources[ch.ID] }, tt.dflt)
			if got != tt.want || len(errs) != tt.invalid {
				t.Errorf("Resolve = %q, %v; want %q with %d errors", got, errs, tt.want, tt.invalid)
			}
			for _, err := range errs {
				if len(err.Error()) > 300 {
					t.Errorf("error not bounded: %d bytes", len(err.Error()))
				}
			}
		})
	}
}

func TestDigestIsStable(t *testing.T) {
	a := []reload.Change{{ID: cm, Hash: "h1", Containers: []string{"a"}}, {ID: sec, Hash: "h2"}}
	b := []reload.Change{{ID: sec, Hash: "h2"}, {ID: cm, Hash: "h1", Containers: []string{"b", "c"}}}
	if Digest(a) != Digest(b) {
		t.Errorf("the order of the changes, or their containers, changed the digest: %s, %s", Digest(a), Digest(b))
	}
	// A fixed digest (printf 'configmap/app=h1\nsecret/creds=h2' | sha256sum): the
	// controller and `kubectl reloader approve` of other versions must agree on it.
	if got, want := Digest(a), "4ee619c04a990bb28da0d28fe9910dd9"; got != want {
		t.Errorf("Digest = %s; want %s", got, want)
	}
	if _, err := ParseApproved(Digest(a)); err != nil {
		t.Errorf("a digest is not a valid approval: %v", err)
	}
	newer := []reload.Change{{ID: cm, Hash: "h3"}, {ID: sec, Hash: "h2"}}
	more := append([]reload.Change{{ID: source.ID{Kind: source.ConfigMap, Name: "other"}, Hash: "h9"}}, a...)
	renamed := []reload.Change{{ID: source.ID{Kind: source.Secret, Name: "app"}, Hash: "h1"}, {ID: sec, Hash: "h2"}}
	for name, c := range map[string][]reload.Change{"a newer content": newer, "one more source": more, "another kind": renamed} {
		if Digest(c) == Digest(a) {
			t.Errorf("%s has the same digest", name)
		}
	}
}

func TestParseApprovedBounds(t *testing.T) {
	full := "0123456789abcdef0123456789abcdef"
	for _, v := range []string{"", "xyz", strings.ToUpper(full), full[1:], full + "0", strings.Repeat("a", 1<<20), full[1:] + "\x1b"} {
		if _, err := ParseApproved(v); err == nil {
			t.Errorf("ParseApproved(%.40q) = nil error", v)
		} else if len(err.Error()) > 300 {
			t.Errorf("ParseApproved(%.40q): error of %d bytes", v, len(err.Error()))
		} else if strings.Contains(err.Error(), strings.Repeat("a", 65)) {
			t.Errorf("ParseApproved(%.40q): error %q echoes more than 64 bytes of the value", v, err)
		}
	}
	if d, err := ParseApproved(" " + full + "\n"); err != nil || d != full {
		t.Errorf("ParseApproved of a padded digest = %q, %v", d, err)
	}
	if d, err := ParsePending(full); err != nil || d != full {
		t.Errorf("ParsePending of a digest = %q, %v", d, err)
	}
	// The 64-bit digest of an older reloader is refused, saying to approve again.
	if _, err := ParseApproved("4ee619c04a990bb2"); err == nil || !strings.Contains(err.Error(), "64-bit digest of an older reloader") || !strings.Contains(err.Error(), "approve again") {
		t.Errorf("ParseApproved of a 64-bit digest: %v; want refused, saying to approve again", err)
	}
	g := Decide(Approve, []reload.Change{{ID: cm, Hash: "h1"}, {ID: sec, Hash: "h2"}}, "4ee619c04a990bb2", true, time.Time{}, "x")
	if g.Approved || g.Hold == nil || len(g.Invalid) != 1 {
		t.Errorf("an approval by the 64-bit prefix of the due digest: %+v; want held and reported", g)
	}
}

func TestDecideGate(t *testing.T) {
	since := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	due := []reload.Change{{ID: cm, Hash: "h1"}}
	digest := Digest(due)
	other := Digest([]reload.Change{{ID: cm, Hash: "h0"}})

	if g := Decide(Reload, due, "", false, since, "kubectl reloader approve deployment/web -n shop"); g.Hold != nil || g.Approved {
		t.Errorf("mode reload gated: %+v", g)
	}
	if g := Decide(Notify, due, "", false, since, "kubectl reloader approve deployment/web -n shop"); g.Hold != nil {
		t.Errorf("mode notify held: %+v", g)
	}
	g := Decide(Approve, due, "", false, since, "kubectl reloader approve deployment/web -n shop")
	if g.Hold == nil || g.Hold.Reason != reload.HoldApproval || g.Digest != digest {
		t.Fatalf("no approval: %+v; want a hold for %s", g, digest)
	}
	for _, want := range []string{"waiting for approval of " + digest + " since 2026-11-27T03:00:00Z", "kubectl reloader approve deployment/web -n shop"} {
		if !strings.Contains(g.Hold.Why, want) {
			t.Errorf("Why = %q; want %q in it", g.Hold.Why, want)
		}
	}
	if g := Decide(Approve, due, digest, true, since, "x"); !g.Approved || g.Hold != nil {
		t.Errorf("approved: %+v; want it to go", g)
	}
	g = Decide(Approve, due, other, true, since, "x")
	if g.Approved || g.Hold == nil || len(g.Invalid) != 0 || !strings.Contains(g.Hold.Why, "names another content") {
		t.Errorf("an approval of another content: %+v; want held, and said so", g)
	}
	g = Decide(Approve, due, "yes please", true, since, "x")
	if g.Approved || g.Hold == nil || len(g.Invalid) != 1 {
		t.Errorf("a bad approval: %+v; want held and reported", g)
	}
	if g := Decide(Approve, nil, "", false, since, "x"); g.Hold != nil {
		t.Errorf("nothing due, held: %+v", g)
	}
}
