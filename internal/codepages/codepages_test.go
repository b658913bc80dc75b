package codepages

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

const sample = `00400000-018fc000 r-xp 00000000 fe:00 9977940                            /bin/reloader
Size:              21488 kB
Rss:               17328 kB
Private_Dirty:         0 kB
Shared_Dirty:          0 kB
Anonymous:             0 kB
Swap:                  0 kB
Locked:                0 kB
02fb8000-03053000 rw-p 02bb8000 fe:00 9977940                            /bin/reloader
Rss:                 556 kB
Private_Dirty:       120 kB
Anonymous:           120 kB
c000000000-c004000000 rw-p 00000000 00:00 0 
Rss:               30696 kB
Anonymous:         30696 kB
`

func TestParse(t *testing.T) {
	got := parse([]byte(sample))
	if len(got) != 3 {
		t.Fatalf("%d mappings, want 3: %+v", len(got), got)
	}
	text, data, anon := got[0], got[1], got[2]
	if text.start != 0x400000 || text.end != 0x18fc000 || text.perms != "r-xp" || text.path != "/bin/reloader" || text.rss != 17328<<10 || text.anon != 0 {
		t.Errorf("text: %+v", text)
	}
	if data.perms != "rw-p" || data.anon != 120<<10 {
		t.Errorf("data: %+v", data)
	}
	if anon.path != "" || anon.rss != 30696<<10 {
		t.Errorf("anonymous: %+v", anon)
	}
}

// rssFile is RssFile of /proc/self/status, in bytes.
func rssFile(t *testing.T) uint64 {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

// TestReleaseGivesBackTheBinarysPages runs on the test binary itself: its pages go, and the
// process runs on (its code comes back as it is read).
func TestReleaseGivesBackTheBinarysPages(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/smaps")
	}
	before := rssFile(t)
	released, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	after := rssFile(t)
	if released == 0 || after >= before {
		t.Errorf("released %d bytes; RssFile %d before, %d after", released, before, after)
	}
	// Still runs: code and read-only data come back from the file.
	if s := strings.Repeat("ok", 3); s != "okokok" {
		t.Errorf("after release: %q", s)
	}
	t.Logf("released %d KiB; RssFile %d KiB before, %d KiB after", released>>10, before>>10, after>>10)
}
