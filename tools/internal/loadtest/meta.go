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
	if listsFlag(help(bin), "--metrics-addr") {
		return "--metrics-addr"
	}
	return ""
}

// help is what bin prints for --help, away from any cluster.
func help(bin string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--help")
	cmd.Env = withoutCluster(os.Environ())
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// listsFlag reports whether a --help text lists flag ("--name") as one of its flags.
func listsFlag(helpText, flag string) bool {
	return regexp.MustCompile(`(?m)^\s*(-\w, )?` + regexp.QuoteMeta(flag) + `[ =]`).MatchString(helpText)
}

// OwnArgs splits args ("--name=value") into those bin's --help lists, which it is given, and
// those it is not: a scenario's flags of this project's build (the flap breaker's, say) go to
// a build that has them and never break one that has not (upstream's, which exits on an
// unknown flag).
func OwnArgs(bin string, args []string) (given, left []string) {
	text := help(bin)
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		if listsFlag(text, name) {
			given = append(given, a)
		} else {
			left = append(left, a)
		}
	}
	return given, left
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
