package explain

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestShortHash(t *testing.T) {
	for h, want := range map[string]string{
		"3e1e6ba13a84ea6e20e0c5e1b3a57cdd": "3e1e6ba13a84",
		"7c69966d:9396e8be0123456789":      "7c69966d:9396e8be",
		"keys.b78902b4.1a2b3c4d5e6f7a8b9c": "1a2b3c4d5e6f",
		"7c69966d:keys.b78902b4.1a2b3c4d5": "7c69966d:1a2b3c4d",
		"":                                 "(none)",
		"unknown":                          "unknown",
		"(folded)":                         "(folded)",
	} {
		if got := short(h, true); got != want {
			t.Errorf("short(%q) = %q, want %q", h, got, want)
		}
	}
	if got := short("3e1e6ba13a84", false); got != "-" {
		t.Errorf("hash of a source that reloads nothing shown as %q", got)
	}
}

// TestWriteTextSanitizes: an Event note and names from the cluster carrying escapes reach the
// text output without them, and the layout keeps its own lines and columns.
func TestWriteTextSanitizes(t *testing.T) {
	w := &Workload{Kind: "Deployment", Namespace: "shop", Name: "web\x1b[2J",
		Sources: []SourceDecision{{Kind: "ConfigMap", Name: "cfg\x1b]0;x\x07", Reloads: true, Reason: "named\nhere", State: StateChanged}},
		Next:    Next{Action: ActionReload, Why: "changed\x1b[1A"},
		Events:  []Event{{Time: time.Unix(0, 0), Type: "Normal", Reason: "Reloaded", Message: "ok\x1b[1A\x1b[2Kforged line\u009b31m"}},
		Notes:   []string{"note\x1b[8m"},
	}
	var out bytes.Buffer
	if err := w.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"\x1b", "\u009b", "\x07"} {
		if strings.Contains(out.String(), bad) {
			t.Errorf("output holds %q:\n%q", bad, out.String())
		}
	}
	for _, want := range []string{"Deployment shop/web\n", "configmap/cfg ", "named here", "okforged line", "  note\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
