package image

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"github.com/reloader-operator/reloader/internal/testutil"
)

// TestWriteOutputs reads back what Write made, as a registry client or `docker load` would:
// a valid OCI layout whose index.json names the index by tag, and per architecture a
// tarball whose manifest.json tags the same config and layer.
func TestWriteOutputs(t *testing.T) {
	r := built(t)
	out := t.TempDir()
	o, err := Write(out, DefaultRepository, r)
	testutil.Must(t, err)

	p, err := layout.FromPath(o.Layout)
	testutil.Must(t, err)
	top, err := p.ImageIndex()
	testutil.Must(t, err)
	tm, err := top.IndexManifest()
	testutil.Must(t, err)
	if len(tm.Manifests) != 1 || tm.Manifests[0].Digest != digest(t, r.Index) {
		t.Fatalf("index.json lists %+v, want only the index %s", tm.Manifests, digest(t, r.Index))
	}
	if got := tm.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; got != Tag(testMeta.Version) {
		t.Errorf("index.json ref.name %q, want %q", got, Tag(testMeta.Version))
	}
	err = filepath.WalkDir(o.Layout, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if fi, err := d.Info(); err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v, want -rw-r--r--", path, fi.Mode())
		}
		return nil
	})
	testutil.Must(t, err)
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	testutil.Must(t, err)
	if err := validate.Index(idx); err != nil {
		t.Errorf("OCI layout: %v", err)
	}

	wantFiles := []string{"oci"}
	for _, arch := range Arches {
		path := o.Tarballs[arch]
		wantFiles = append(wantFiles, filepath.Base(path))
		m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(path) })
		testutil.Must(t, err)
		if len(m) != 1 || !slices.Equal(m[0].RepoTags, []string{o.Ref.String()}) {
			t.Errorf("%s: manifest.json %+v, want one image tagged %s", path, m, o.Ref)
		}
		img, err := tarball.ImageFromPath(path, &o.Ref)
		testutil.Must(t, err)
		if err := validate.Image(img); err != nil {
			t.Errorf("%s: %v", path, err)
		}
		gotCfg, _ := img.ConfigName()
		wantCfg, _ := r.Images[arch].ConfigName()
		if gotCfg != wantCfg {
			t.Errorf("%s: config %s, want %s", path, gotCfg, wantCfg)
		}
	}
	entries, err := os.ReadDir(out)
	testutil.Must(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(wantFiles)
	if !slices.Equal(names, wantFiles) {
		t.Errorf("wrote %v, want %v", names, wantFiles)
	}
}
