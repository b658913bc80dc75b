package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Arches are the architectures `make image` builds, the three upstream ships; arm is ARMv7
// (see Variant).
var Arches = []string{"amd64", "arm64", "arm"}

// armVariant is the one ARM version 32-bit binaries are built for (GOARM), and the platform
// variant the index lists them under: what upstream's linux/arm image runs on (Raspberry Pi 2
// and later, in 32-bit mode).
const armVariant = "v7"

// Variant is the OCI platform variant of arch: "v7" for arm, none for the others, which have
// one baseline each.
func Variant(arch string) string {
	if arch == "arm" {
		return armVariant
	}
	return ""
}

// Platform names arch as an image platform: linux/amd64, linux/arm/v7.
func Platform(arch string) string {
	if v := Variant(arch); v != "" {
		return "linux/" + arch + "/" + v
	}
	return "linux/" + arch
}

// Options say what to build.
type Options struct {
	// RepoRoot is the main module's directory, where ./cmd/reloader is built.
	RepoRoot string
	// Arches to build, in index order.
	Arches []string
	Metadata
}

// Result is a built image: one per architecture and the index over them.
type Result struct {
	Arches []string
	Images map[string]v1.Image
	Index  v1.ImageIndex
	Meta   Metadata
}

// Build compiles reloader for each architecture and assembles the images and their index.
// Nothing is written outside temporary files; Write does that.
func Build(ctx context.Context, opts Options) (*Result, error) {
	if len(opts.Arches) == 0 {
		return nil, fmt.Errorf("no architecture to build")
	}
	r := &Result{Arches: opts.Arches, Images: map[string]v1.Image{}, Meta: opts.Metadata}
	for _, arch := range opts.Arches {
		bin, err := Binary(ctx, opts.RepoRoot, "linux", arch, opts.Version, opts.Commit)
		if err != nil {
			return nil, err
		}
		rootfs, err := RootFS(bin, opts.Created)
		if err != nil {
			return nil, err
		}
		if r.Images[arch], err = Image(arch, rootfs, opts.Metadata); err != nil {
			return nil, fmt.Errorf("assemble %s image: %w", Platform(arch), err)
		}
	}
	r.Index = Index(r.Images, r.Arches, opts.Metadata)
	return r, nil
}

// SourceDate is the time a build is stamped with: $SOURCE_DATE_EPOCH (seconds) if set, else
// the committer time of HEAD in repoRoot. Never the clock, so that a rebuild of the same
// commit gives the same digests.
func SourceDate(ctx context.Context, repoRoot string) (time.Time, error) {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: not a number of seconds", s)
		}
		return time.Unix(sec, 0).UTC(), nil
	}
	cmd := exec.CommandContext(ctx, "git", "log", "-1", "--format=%ct", "HEAD")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		return time.Time{}, fmt.Errorf("no commit time (git log in %s: %v); set SOURCE_DATE_EPOCH", repoRoot, err)
	}
	sec, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("git commit time %q: %w", out, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}
