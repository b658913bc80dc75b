// Package version says which build of reloader is running. Release builds stamp Version and
// Commit with -ldflags "-X"; other builds fall back to what Go records in the binary.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set at link time by release builds (make build, make image):
//
//	-X github.com/reloader-operator/reloader/internal/version.Version=v1.2.3
//	-X github.com/reloader-operator/reloader/internal/version.Commit=<git sha>
var (
	Version = ""
	Commit  = ""
)

// Info describes the running binary.
type Info struct {
	Version    string `json:"version"`
	Commit     string `json:"commit"`
	CommitTime string `json:"commitTime,omitempty"`
	Modified   bool   `json:"modified,omitempty"`
	GoVersion  string `json:"goVersion"`
}

// Get returns the stamped version, else the module version and VCS data Go recorded.
func Get() Info {
	info := Info{Version: Version, Commit: Commit, GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		if info.Version == "" && bi.Main.Version != "" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if info.Commit == "" {
					info.Commit = s.Value
				}
			case "vcs.time":
				info.CommitTime = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	if info.Version == "" {
		info.Version = "(devel)"
	}
	return info
}

// String is the line `reloader --version` prints.
func (i Info) String() string {
	commit := i.Commit
	if commit == "" {
		commit = "unknown"
	}
	if i.Modified {
		commit += "-dirty"
	}
	return fmt.Sprintf("reloader %s (commit %s, %s)", i.Version, commit, i.GoVersion)
}
