package termsafe

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSanitize(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"plain", "Reloaded deployment web: configmap/cfg changed", "Reloaded deployment web: configmap/cfg changed"},
		{"unicode kept", "café ✓ U+FFFD \uFFFD", "café ✓ U+FFFD \uFFFD"},
		{"clear screen", "a\x1b[2Jb", "ab"},
		{"colour", "\x1b[31;1mred\x1b[0m", "red"},
		{"cursor up and erase line", "ok\x1b[1A\x1b[2Kfaked", "okfaked"},
		{"private mode", "\x1b[?25lhidden cursor", "hidden cursor"},
		{"OSC title, BEL", "\x1b]0;pwned\x07text", "text"},
		{"OSC hyperlink, ST", "\x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\", "click"},
		{"DCS", "\x1bPq#0;2;0;0;0\x1b\\after", "after"},
		{"unterminated OSC", "before\x1b]0;title", "before"},
		{"two-byte escape", "\x1bcreset", "reset"},
		{"ESC at end", "end\x1b", "end"},
		{"unterminated CSI", "x\x1b[12", "x"},
		{"C1 CSI", "a\u009b2Jb", "ab"},
		{"C1 NEL and OSC", "a\u0085b\u009d0;t\u009cc", "ab0;tc"},
		{"raw 0x9b byte", "a\x9b2Jb", "a\uFFFD2Jb"},
		{"other C0", "bell\x07 back\x08space nul\x00", "bell backspace nul"},
		{"DEL", "a\x7fb", "ab"},
		{"newline and tab to space", "line1\nline2\tcell\r", "line1 line2 cell "},
		{"bidi override", "evil\u202egnp.exe", "evilgnp.exe"},
		{"bidi isolate", "a\u2066b\u2069c", "abc"},
	} {
		if got := Sanitize(tt.in); got != tt.want {
			t.Errorf("%s: Sanitize(%q) = %q, want %q", tt.name, tt.in, got, tt.want)
		}
	}
}

// FuzzSanitize: whatever the input, the output holds no control character, escape, C1 or
// bidirectional control, is valid UTF-8, is stable when sanitized again, and text with
// nothing to drop passes unchanged.
func FuzzSanitize(f *testing.F) {
	for _, seed := range []string{"", "plain", "\x1b[31mred\x1b[0m", "\x1b]8;;u\x1b\\l", "a\x9bb", "\u009b1;2H", "x\x1b", "\x1bP\x1b\\", "a\u202eb", "tab\tnl\n"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := Sanitize(in)
		if !utf8.ValidString(out) {
			t.Fatalf("Sanitize(%q) = %q: invalid UTF-8", in, out)
		}
		for _, r := range out {
			if Control(r) {
				t.Fatalf("Sanitize(%q) = %q: holds %U", in, out, r)
			}
		}
		if again := Sanitize(out); again != out {
			t.Fatalf("Sanitize not stable: %q -> %q -> %q", in, out, again)
		}
		if Clean(in) && out != in {
			t.Fatalf("clean %q changed to %q", in, out)
		}
	})
}

func TestClipNoteKeepsNotesTheAPIServerTakes(t *testing.T) {
	short := "Rollout of Deployment web complete"
	if got := ClipNote(short); got != short {
		t.Errorf("short note changed: %q", got)
	}
	long := strings.Repeat("é", 600) // 1200 bytes
	got := ClipNote(long)
	if len(got) > MaxNote || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("clipped to %d bytes, valid UTF-8 %v: ...%q", len(got), utf8.ValidString(got), got[len(got)-8:])
	}
}
