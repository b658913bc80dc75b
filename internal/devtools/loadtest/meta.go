package loadtest

import (
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// describe records a binary's --version (its first line) and its SHA-256. A binary without the
// flag (upstream's exits non-zero) is described from its Go build information instead: its
// module and the version its -ldflags set, marked "(build info)"; "" when there is none.
func describe(bin string) BuildInfo {
	var b BuildInfo
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--version")
	cmd.Env = withoutCluster(os.Environ())
	if out, err := cmd.Output(); err == nil {
		b.Version = strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	} else {
		b.Version = buildInfoVersion(bin)
	}
	if f, err := os.Open(bin); err == nil {
		h := sha256.New()
		if _, err := io.Copy(h, f); err == nil {
			b.SHA256 = hex.EncodeToString(h.Sum(nil))
		}
		f.Close()
	}
	return b
}

// ldflagsVersion finds `-X <pkg>.Version=<v>` in a build's -ldflags.
var ldflagsVersion = regexp.MustCompile(`-X[ =]\S*\.Version=(\S+)`)

// buildInfoVersion describes a Go binary from its build information: "<module> <version>
// (build info, <go version>)", the version from -ldflags when they set one.
func buildInfoVersion(bin string) string {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return ""
	}
	version := info.Main.Version
	for _, s := range info.Settings {
		if s.Key == "-ldflags" {
			if m := ldflagsVersion.FindStringSubmatch(s.Value); m != nil {
				version = strings.Trim(m[1], `'"`)
			}
		}
	}
	return strings.TrimSpace(info.Main.Path+" "+version) + " (build info, " + info.GoVersion + ")"
}

// DetectMetricsAddrFlag says which flag sets bin's metrics address: "--metrics-addr" when its
// --help lists that flag (this project's binary), "" otherwise (upstream's binary takes none and
// serves /metrics on :9090; its --help exits early, before listing flags, without a cluster).
func DetectMetricsAddrFlag(bin string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--help")
	cmd.Env = withoutCluster(os.Environ())
	out, _ := cmd.CombinedOutput()
	if regexp.MustCompile(`(?m)^\s*(-\w, )?--metrics-addr[ =]`).Match(out) {
		return "--metrics-addr"
	}
	return ""
}

// withoutCluster drops the variables that would point a binary at a cluster, so that --help and
// --version never reach one.
func withoutCluster(env []string) []string {
	var out []string
	for _, e := range env {
		if strings.HasPrefix(e, "KUBECONFIG=") || strings.HasPrefix(e, "KUBERNETES_SERVICE_") {
			continue
		}
		out = append(out, e)
	}
	return out
}
