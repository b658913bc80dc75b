// Package codepages gives back the pages of reloader's own binary that its process has
// mapped but no longer reads. A Go binary built on client-go links every Kubernetes API group
// (client-go's leader election imports its informers, which import them all), and its start
// (package initialisation, the scheme, flag parsing, discovery, the informers' first lists)
// touches most of its 45 MB of code and read-only data; the kernel maps a file's pages in
// blocks around each touch. Those pages stay resident in the process (RssFile) long after
// start, a third of reloader's RSS at 2,000 workloads. They are clean copies of the file:
// dropping the mapping (madvise MADV_DONTNEED) costs nothing but a minor fault when a page is
// read again, from the page cache, which the kernel can then reclaim as it needs.
package codepages

import (
	"bufio"
	"bytes"
	"context"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// mapping is one mapping of /proc/self/smaps.
type mapping struct {
	start, end   uintptr
	perms, path  string
	rss, anon    uint64 // bytes
	swap, locked uint64
}

// Every releases the pages at once and then every period until ctx ends, reporting each
// release to report (bytes given back, or the error). Start-up code is given back once it
// has run; code that runs later and rarely (a fan-out, a relist) is given back at the next
// turn, and what runs all the time comes back at once as a minor fault. Each turn also
// returns the Go heap's free pages to the kernel (debug.FreeOSMemory, a collection): the
// start's decoding leaves pages that the runtime's background scavenger would give back only
// slowly, and afterwards a collection of reloader's heap, its cache, is a few milliseconds.
func Every(ctx context.Context, period time.Duration, report func(released uint64, err error)) {
	for {
		debug.FreeOSMemory()
		n, err := Release()
		report(n, err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(period):
		}
	}
}

// parse reads the mappings of an smaps file.
func parse(smaps []byte) []mapping {
	var out []mapping
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if !strings.HasSuffix(fields[0], ":") {
			lo, hi, ok := strings.Cut(fields[0], "-")
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if !ok || err1 != nil || err2 != nil || len(fields) < 2 || len(fields[1]) < 4 {
				out = append(out, mapping{perms: "----"}) // unreadable: never touched
				continue
			}
			m := mapping{start: uintptr(start), end: uintptr(end), perms: fields[1]}
			if len(fields) >= 6 {
				m.path = strings.Join(fields[5:], " ")
			}
			out = append(out, m)
			continue
		}
		if len(out) == 0 || len(fields) < 2 {
			continue
		}
		kb, err := strconv.ParseUint(fields[1], 10, 64)
		if err != nil {
			continue
		}
		m := &out[len(out)-1]
		switch fields[0] {
		case "Rss:":
			m.rss = kb << 10
		case "Anonymous:":
			m.anon = kb << 10
		case "Swap:":
			m.swap = kb << 10
		case "Locked:":
			m.locked = kb << 10
		}
	}
	return out
}
