package image

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// DefaultRepository is the name the tarballs are tagged with.
const DefaultRepository = "ghcr.io/reloader-operator/reloader"

// Outputs are the files Write made.
type Outputs struct {
	// Layout is the OCI image layout directory; its index.json names the index by tag.
	Layout string
	// Tarballs are `docker load`-able files, by architecture.
	Tarballs map[string]string
	// Ref is the reference the tarballs are tagged with.
	Ref name.Tag
}

// Write puts the build under out: an OCI layout at out/oci (replaced, so no stale blobs
// remain) and out/reloader-<tag>-linux-<arch>[-<variant>].tar per architecture, tagged
// <repository>:<tag>.
func Write(out, repository string, r *Result) (*Outputs, error) {
	tag := Tag(r.Meta.Version)
	ref, err := name.NewTag(repository+":"+tag, name.StrictValidation)
	if err != nil {
		return nil, fmt.Errorf("image reference: %w", err)
	}
	o := &Outputs{Layout: filepath.Join(out, "oci"), Tarballs: map[string]string{}, Ref: ref}

	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(o.Layout); err != nil {
		return nil, err
	}
	p, err := layout.Write(o.Layout, empty.Index)
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: %w", o.Layout, err)
	}
	// ref.name is the tag tools such as skopeo (oci:dist/oci:<tag>) look up.
	if err := p.AppendIndex(r.Index, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tag,
	})); err != nil {
		return nil, fmt.Errorf("OCI layout %s: %w", o.Layout, err)
	}
	if err := dropExecBits(o.Layout); err != nil {
		return nil, err
	}

	for _, arch := range r.Arches {
		path := filepath.Join(out, fmt.Sprintf("reloader-%s-%s.tar", tag, strings.ReplaceAll(Platform(arch), "/", "-")))
		if err := tarball.WriteToFile(path, ref, r.Images[arch]); err != nil {
			return nil, fmt.Errorf("tarball %s: %w", path, err)
		}
		o.Tarballs[arch] = path
	}
	return o, nil
}

var notInTag = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// Tag turns a version (as `git describe` prints it, or a semver with build metadata) into a
// valid image tag: characters a tag can't hold become "-", at most 128 of them, and no
// leading "." or "-".
func Tag(version string) string {
	t := notInTag.ReplaceAllString(version, "-")
	for len(t) > 0 && (t[0] == '.' || t[0] == '-') {
		t = t[1:]
	}
	if len(t) > 128 {
		t = t[:128]
	}
	if t == "" {
		return "dev"
	}
	return t
}

// dropExecBits makes the layout's files -rw-r--r--: go-containerregistry creates them
// with every permission bit the umask leaves, and JSON or blobs are not programs.
func dropExecBits(dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return os.Chmod(path, 0o644)
	})
}
