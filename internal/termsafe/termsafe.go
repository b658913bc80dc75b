// Package termsafe makes text read from a cluster safe to print on a terminal, and notes
// written to it short enough for the API server.
package termsafe

import (
	"strings"
	"unicode/utf8"
)

// Sanitize makes text read from the cluster (names, Event notes, error messages) safe to
// print on a terminal. Anyone who may write an Event or name an object could otherwise move
// the cursor, rewrite earlier lines, retitle the window or hide text from whoever runs
// explain. Escape sequences (CSI, OSC and the other ESC forms) are dropped whole, the other
// C0 and C1 controls and DEL one by one; a tab or line break becomes a space, since the
// layout's own tabs and lines are not in the values; invalid UTF-8 becomes U+FFFD, since a
// stray 0x9B byte is a CSI to a terminal that reads bytes; the bidirectional overrides that
// reorder what is shown are dropped.
func Sanitize(s string) string {
	if Clean(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == 0x1b:
			i += escapeLen(s[i:])
			continue
		case r == 0x9b: // the C1 CSI: its parameters go with it
			i += size + csiLen(s[i+size:])
			continue
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
		case r == '\t' || r == '\n' || r == '\r':
			b.WriteByte(' ')
		case Control(r):
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Clean reports whether Sanitize leaves s as it is: the common case, left unallocated.
func Clean(s string) bool {
	for i, r := range s {
		if Control(r) || (r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD")) {
			return false
		}
	}
	return true
}

// Control reports whether r is dropped: C0, DEL, C1, and the bidirectional embeddings,
// overrides and isolates.
func Control(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// escapeLen is the length of the escape sequence at the start of s (s[0] is ESC): a CSI
// (ESC [), a string sequence (OSC ESC ], DCS ESC P, SOS ESC X, PM ESC ^, APC ESC _) ended by
// BEL or ESC \, or ESC and one more byte.
func escapeLen(s string) int {
	if len(s) < 2 {
		return len(s)
	}
	switch s[1] {
	case '[':
		return 2 + csiLen(s[2:])
	case ']', 'P', 'X', '^', '_':
		return 2 + stringLen(s[2:])
	}
	_, size := utf8.DecodeRuneInString(s[1:])
	return 1 + size
}

// csiLen is the length of a CSI's parameters, intermediates and final byte (0x40-0x7E) at
// the start of s; an unterminated CSI takes what looks like one.
func csiLen(s string) int {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 0x40 && c <= 0x7e:
			return i + 1
		case c < 0x20 || c > 0x3f:
			return i // not a parameter or intermediate: the sequence ends unfinished here
		}
	}
	return len(s)
}

// stringLen is the length of a string sequence's body up to and with its terminator (BEL,
// ESC \ or the C1 ST); an unterminated one takes the rest.
func stringLen(s string) int {
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == 0x07:
			return i + 1
		case s[i] == 0x1b:
			if i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
			return i
		case strings.HasPrefix(s[i:], "\u009c"):
			return i + len("\u009c")
		}
	}
	return len(s)
}

// MaxNote is the longest Event note the API server accepts (events.k8s.io/v1).
const MaxNote = 1024

// ClipNote shortens a note the API server would refuse, at a character boundary: an Event
// whose note grew with its input (many sources, a long error) must still be written.
func ClipNote(note string) string {
	if len(note) <= MaxNote {
		return note
	}
	const more = "…"
	cut := MaxNote - len(more)
	for cut > 0 && !utf8.RuneStart(note[cut]) {
		cut--
	}
	return note[:cut] + more
}
