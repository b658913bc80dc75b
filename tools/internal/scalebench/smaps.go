package scalebench

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Breakdown splits a process's resident memory by where it comes from, read from
// /proc/<pid>/smaps and the Go runtime's own figures on /metrics.
type Breakdown struct {
	// Binary is resident pages mapped from the executable's own file (its code and read-only
	// data); OtherFiles from any other file (the C library, the dynamic loader, if any).
	Binary     uint64 `json:"binaryBytes"`
	OtherFiles uint64 `json:"otherFilesBytes"`
	// Anon is every anonymous resident page: the Go heap and the runtime's own.
	Anon uint64 `json:"anonBytes"`
	// HeapInuse is the Go heap's spans in use (live objects and their fragmentation);
	// Runtime is the rest of Anon: goroutine stacks, GC metadata, span structures, and heap
	// pages freed but not yet returned to the kernel.
	HeapInuse uint64 `json:"heapInuseBytes"`
	Runtime   uint64 `json:"runtimeBytes"`
	// Stacks, GCMeta and Idle are parts of Runtime from /metrics (go_memstats_stack_inuse,
	// _gc_sys, _heap_idle - _heap_released) when reported.
	Stacks, GCMeta, Idle uint64
}

func (b Breakdown) String() string {
	return fmt.Sprintf("anon heap %s + runtime %s (stacks %s, GC metadata %s, idle heap %s) + binary's file %s + other files %s",
		mib(b.HeapInuse), mib(b.Runtime), mib(b.Stacks), mib(b.GCMeta), mib(b.Idle), mib(b.Binary), mib(b.OtherFiles))
}

// smaps sums the Rss of each mapping of pid by kind: the executable's file, other files,
// anonymous.
func smaps(pid int) (binary, otherFiles, anon uint64, err error) {
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	defer f.Close()
	path := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if !strings.HasSuffix(fields[0], ":") { // a mapping's header: range perms offset dev inode [path]
			path = ""
			if len(fields) >= 6 {
				path = strings.Join(fields[5:], " ")
			}
			continue
		}
		if fields[0] != "Rss:" || len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseUint(fields[1], 10, 64)
		switch {
		case path == exe && exe != "":
			binary += kb << 10
		case strings.HasPrefix(path, "/"):
			otherFiles += kb << 10
		default:
			anon += kb << 10
		}
	}
	return binary, otherFiles, anon, sc.Err()
}
