package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// versionPkg holds the variables the link flags stamp.
const versionPkg = "github.com/reloader-operator/reloader/internal/version"

// Binary compiles ./cmd/reloader of the main module at repoRoot into a static goos/arch
// binary stamped with version and commit, and returns its bytes. The flags make the bytes
// depend only on the source, the Go toolchain and the stamps: no cgo, no file paths, no
// build id, and a fixed instruction set for each architecture (the baseline, and ARMv7 for
// arm, as Variant says). The image and the release archives (deployments/release) both
// build through here, so `reloader --version` says the same in each.
func Binary(ctx context.Context, repoRoot, goos, arch, version, commit string) ([]byte, error) {
	for _, v := range []string{version, commit} {
		// The go command splits -ldflags on spaces and quotes.
		if v == "" || strings.ContainsAny(v, " \t\n'\"") {
			return nil, fmt.Errorf("version and commit must be non-empty words, got %q", v)
		}
	}
	dir, err := os.MkdirTemp("", "reloader-image-bin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "reloader")

	ldflags := fmt.Sprintf("-s -w -buildid= -X %s.Version=%s -X %s.Commit=%s", versionPkg, version, versionPkg, commit)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, "./cmd/reloader")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+arch,
		"GOAMD64=v1", "GOARM64=v8.0", "GOARM="+strings.TrimPrefix(armVariant, "v"))
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./cmd/reloader for %s/%s: %w\n%s", goos, arch, err, msg)
	}
	return os.ReadFile(out)
}
