package codepages

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Release unmaps, from this process, the pages of its own executable's read-only mappings
// (code and read-only data) and returns how many bytes were resident in them. Only mappings
// that hold no private page are touched: a page of a private file mapping written since it
// was mapped (say, relocated data of a position-independent binary) is an anonymous copy,
// and dropping it would lose the write. (A page dirty in the page cache, as the file's pages
// are just after it was written, is the file's own and stays in the cache.)
func Release() (uint64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	var released uint64
	for _, m := range parse(smaps) {
		if m.path != exe || m.perms[1] == 'w' || m.anon > 0 || m.swap > 0 || m.locked > 0 || m.rss == 0 {
			continue
		}
		// unix.Madvise takes a slice; the mapping is no Go memory, so the raw call.
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_DONTNEED); errno != 0 {
			return released, fmt.Errorf("madvise %x-%x %s: %w", m.start, m.end, m.perms, errno)
		}
		released += m.rss
	}
	return released, nil
}
