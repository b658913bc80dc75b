// Package release builds what a release publishes besides the image: per platform, an
// archive of reloader and one of the kubectl plugin (kubectl-reloader and its completion
// helper), the Helm chart package, the krew manifest that points at the plugin archives,
// and checksums.txt over them all. The release workflow (.github/workflows/release.yaml)
// runs it as `make dist`, and so can anyone, to check a release's files.
package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/reloader-operator/reloader/deployments/image"
)

// Platform is an operating system and architecture the binaries are built for.
type Platform struct{ OS, Arch string }

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// Platforms are the binaries' platforms: where people run kubectl. (The controller itself
// runs from the image, which also covers linux/arm.)
var Platforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}

// Names of the binaries, and of the script kubectl runs to complete the plugin's arguments.
const (
	ControllerBin = "reloader"
	PluginBin     = "kubectl-reloader"
	CompletionBin = "kubectl_complete-reloader"
)

// completionScript is where the repository keeps the completion helper.
const completionScript = "deployments/krew/" + CompletionBin

// ChecksumsFile lists the SHA-256 of every other file, as sha256sum prints them.
const ChecksumsFile = "checksums.txt"

// Options say what to build.
type Options struct {
	// RepoRoot is the main module's directory.
	RepoRoot string
	// Version is the release (a tag such as v1.2.3) and Commit its git commit; both are
	// stamped into the binaries as `make build` and the image do.
	Version, Commit string
	// Created is the time of every archived file: the commit's, never the clock.
	Created time.Time
	// Platforms to build; nil means Platforms.
	Platforms []Platform
	// GitHubRepo is owner/name, where the release's files are downloaded from.
	GitHubRepo string
	// NoChart leaves the chart out (it is not reproducible: Helm stamps the clock).
	NoChart bool
}

// Artifacts are the files Build wrote.
type Artifacts struct {
	Dir string
	// Sums maps each file name (relative to Dir) to its hex SHA-256; checksums.txt holds
	// the same.
	Sums map[string]string
	// Archives are the binary archives by platform: [0] reloader, [1] the plugin.
	Archives map[Platform][2]string
	// Chart is the chart package's name, empty with NoChart.
	Chart string
	// Krew is the rendered krew manifest's name; empty when Version is no release tag
	// (krew takes only v-prefixed semantic versions).
	Krew string
}

// ArchiveName is the file a binary's archive is published as: <bin>_<version>_<os>_<arch>.tar.gz.
func ArchiveName(bin, version string, p Platform) string {
	return fmt.Sprintf("%s_%s_%s_%s.tar.gz", bin, image.Tag(version), p.OS, p.Arch)
}

// Build compiles the binaries and writes the archives, the chart, the krew manifest and
// checksums.txt into out, which it creates.
func Build(ctx context.Context, out string, opts Options) (*Artifacts, error) {
	if opts.Platforms == nil {
		opts.Platforms = Platforms
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	completion, err := os.ReadFile(filepath.Join(opts.RepoRoot, completionScript))
	if err != nil {
		return nil, err
	}
	a := &Artifacts{Dir: out, Sums: map[string]string{}, Archives: map[Platform][2]string{}}
	for _, p := range opts.Platforms {
		bin, err := image.Binary(ctx, opts.RepoRoot, p.OS, p.Arch, opts.Version, opts.Commit)
		if err != nil {
			return nil, err
		}
		// One binary, two archives: reloader for those who run the controller outside a
		// cluster, and the plugin under the names kubectl looks for.
		names := [2]string{ArchiveName(ControllerBin, opts.Version, p), ArchiveName(PluginBin, opts.Version, p)}
		contents := [2][]archived{
			{{ControllerBin, bin}},
			{{PluginBin, bin}, {CompletionBin, completion}},
		}
		for i, name := range names {
			data, err := tarGz(contents[i], opts.Created)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if err := a.write(name, data); err != nil {
				return nil, err
			}
		}
		a.Archives[p] = names
	}
	if !opts.NoChart {
		path, err := PackageChart(filepath.Join(opts.RepoRoot, "deployments", "chart", "reloader"), out, opts.Version)
		if err != nil {
			return nil, err
		}
		a.Chart = filepath.Base(path)
		if err := a.sum(a.Chart); err != nil {
			return nil, err
		}
	}
	if IsReleaseTag(opts.Version) {
		tmpl, err := os.ReadFile(filepath.Join(opts.RepoRoot, KrewTemplate))
		if err != nil {
			return nil, err
		}
		manifest, err := RenderKrew(string(tmpl), KrewData{TagName: opts.Version, GitHubRepo: opts.GitHubRepo}, a.Sums)
		if err != nil {
			return nil, err
		}
		a.Krew = KrewManifest
		if err := a.write(a.Krew, manifest); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(out, ChecksumsFile), a.checksums(), 0o644); err != nil {
		return nil, err
	}
	return a, nil
}

// write puts data at name under the output directory and records its sum.
func (a *Artifacts) write(name string, data []byte) error {
	if err := os.WriteFile(filepath.Join(a.Dir, name), data, 0o644); err != nil {
		return err
	}
	a.Sums[name] = sha256Hex(data)
	return nil
}

// sum records the sum of a file something else wrote.
func (a *Artifacts) sum(name string) error {
	data, err := os.ReadFile(filepath.Join(a.Dir, name))
	if err != nil {
		return err
	}
	a.Sums[name] = sha256Hex(data)
	return nil
}

// checksums is checksums.txt: `sha256sum -c checksums.txt` checks a download.
func (a *Artifacts) checksums() []byte {
	var b strings.Builder
	names := make([]string, 0, len(a.Sums))
	for name := range a.Sums {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Fprintf(&b, "%s  %s\n", a.Sums[name], name)
	}
	return []byte(b.String())
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// archived is an executable file of an archive.
type archived struct {
	name string
	data []byte
}

// tarGz archives files, executable and owned by root, with the mtime given and nothing of
// the build machine (no user names, no clock in the gzip header), so the archive depends
// only on the files.
func tarGz(files []archived, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range files {
		h := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     f.name,
			Mode:     0o755,
			Size:     int64(len(f.data)),
			ModTime:  mtime.UTC().Truncate(time.Second),
			Format:   tar.FormatUSTAR,
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
