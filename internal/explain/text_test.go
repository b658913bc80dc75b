package explain

import "testing"

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
