package approval

import (
	"strings"
	"testing"
)

// The annotations are user input: any value is read without panic, an accepted one is what
// reloader itself writes (a digest, a mode), and an error stays short whatever the value.
func FuzzParseApproved(f *testing.F) {
	f.Add("4ee619c04a990bb2")
	f.Add("4ee619c04a990bb28da0d28fe9910dd9")
	f.Add(" 4ee619c04a990bb2\n")
	f.Add(strings.Repeat("f", 200))
	f.Fuzz(func(t *testing.T, v string) {
		d, err := ParseApproved(v)
		if err != nil {
			if len(err.Error()) > 400 {
				t.Fatalf("error of %d bytes", len(err.Error()))
			}
			return
		}
		if len(d) != DigestLen || strings.Trim(d, "0123456789abcdef") != "" {
			t.Fatalf("accepted %q as %q", v, d)
		}
	})
}

func FuzzParseMode(f *testing.F) {
	for _, v := range []string{"reload", "notify", "approve", " approve ", "Approve", ""} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		m, err := ParseMode(v)
		if err != nil {
			if len(err.Error()) > 400 {
				t.Fatalf("error of %d bytes", len(err.Error()))
			}
			return
		}
		if m != Reload && m != Notify && m != Approve {
			t.Fatalf("accepted %q as %q", v, m)
		}
	})
}
