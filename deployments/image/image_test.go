package image

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/reloader-operator/reloader/internal/testutil"
)

// testMeta stamps the test builds; any fixed values do.
var testMeta = Metadata{
	Version: "v0.0.0-imagetest",
	Commit:  "0123456789abcdef0123456789abcdef01234567",
	Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
}

// Compiling reloader for two architectures is the slow part: do it once per test process.
var (
	buildOnce sync.Once
	buildRes  *Result
	buildErr  error
)

func built(t *testing.T) *Result {
	t.Helper()
	buildOnce.Do(func() { buildRes, buildErr = buildForTest(t) })
	if buildErr != nil {
		t.Fatalf("build image: %v", buildErr)
	}
	return buildRes
}

func buildForTest(t *testing.T) (*Result, error) {
	return Build(t.Context(), Options{RepoRoot: repoRoot(t), Arches: Arches, Metadata: testMeta})
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	testutil.Must(t, err)
	if _, err := os.Stat(filepath.Join(root, "cmd", "reloader")); err != nil {
		t.Fatalf("main module not at %s: %v", root, err)
	}
	return root
}

// TestBuildIsReproducible builds the image a second time, from scratch, and compares
// digests and every written byte.
func TestBuildIsReproducible(t *testing.T) {
	first := built(t)
	second, err := buildForTest(t)
	testutil.Must(t, err)
	if a, b := digest(t, first.Index), digest(t, second.Index); a != b {
		t.Errorf("index digests differ: %s and %s", a, b)
	}
	for _, arch := range Arches {
		if a, b := digest(t, first.Images[arch]), digest(t, second.Images[arch]); a != b {
			t.Errorf("linux/%s digests differ: %s and %s", arch, a, b)
		}
	}

	dirA, dirB := t.TempDir(), t.TempDir()
	if _, err := Write(dirA, DefaultRepository, first); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(dirB, DefaultRepository, second); err != nil {
		t.Fatal(err)
	}
	a, b := treeDigests(t, dirA), treeDigests(t, dirB)
	if len(a) == 0 {
		t.Fatal("Write wrote nothing")
	}
	for path, sum := range a {
		if b[path] != sum {
			t.Errorf("%s differs between the two builds", path)
		}
	}
	if len(a) != len(b) {
		t.Errorf("the two builds wrote %d and %d files", len(a), len(b))
	}
	t.Logf("index %s, %d files written", digest(t, first.Index), len(a))
}

// TestIndexAndConfig checks what a runtime reads: the index's platforms, the media types,
// and each config's user, entrypoint, port and labels.
func TestIndexAndConfig(t *testing.T) {
	r := built(t)
	im, err := r.Index.IndexManifest()
	testutil.Must(t, err)
	if im.MediaType != types.OCIImageIndex {
		t.Errorf("index media type %s", im.MediaType)
	}
	var platforms []string
	for _, d := range im.Manifests {
		platforms = append(platforms, d.Platform.String())
		if d.MediaType != types.OCIManifestSchema1 {
			t.Errorf("%s: manifest media type %s", d.Platform, d.MediaType)
		}
		if d.ArtifactType != "" {
			t.Errorf("%s: listed as an artifact of type %s, not as an image", d.Platform, d.ArtifactType)
		}
	}
	if want := []string{"linux/amd64", "linux/arm64", "linux/arm/v7"}; !slices.Equal(platforms, want) {
		t.Errorf("index platforms %v, want %v", platforms, want)
	}

	for _, arch := range Arches {
		img := r.Images[arch]
		cf, err := img.ConfigFile()
		testutil.Must(t, err)
		c := cf.Config
		if cf.OS != "linux" || cf.Architecture != arch || cf.Variant != Variant(arch) {
			t.Errorf("%s: config platform %s/%s variant %q", arch, cf.OS, cf.Architecture, cf.Variant)
		}
		if !cf.Created.Time.Equal(testMeta.Created) {
			t.Errorf("%s: created %v, want %v", arch, cf.Created.Time, testMeta.Created)
		}
		if c.User != "65532:65532" {
			t.Errorf("%s: user %q", arch, c.User)
		}
		if !slices.Equal(c.Entrypoint, []string{"/reloader"}) || len(c.Cmd) != 0 {
			t.Errorf("%s: entrypoint %q cmd %q", arch, c.Entrypoint, c.Cmd)
		}
		if _, ok := c.ExposedPorts["9090/tcp"]; !ok || len(c.ExposedPorts) != 1 {
			t.Errorf("%s: exposed ports %v", arch, c.ExposedPorts)
		}
		for key, want := range map[string]string{
			"org.opencontainers.image.source":   DefaultSource,
			"org.opencontainers.image.version":  testMeta.Version,
			"org.opencontainers.image.revision": testMeta.Commit,
			"org.opencontainers.image.title":    "reloader",
		} {
			if c.Labels[key] != want {
				t.Errorf("%s: label %s = %q, want %q", arch, key, c.Labels[key], want)
			}
		}
		if c.Labels["org.opencontainers.image.description"] == "" {
			t.Errorf("%s: no description label", arch)
		}
		layers, err := img.Layers()
		testutil.Must(t, err)
		if len(layers) != 1 {
			t.Fatalf("%s: %d layers, want 1", arch, len(layers))
		}
		if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
			t.Errorf("%s: layer media type %s", arch, mt)
		}
		size, _ := layers[0].Size()
		t.Logf("linux/%s %s, layer %d bytes", arch, digest(t, img), size)
	}
}

// TestLayerHasNoShellAndAStaticBinary lists each layer: exactly the expected files, so no
// shell or anything else to exec, and a binary with no interpreter and no shared libraries.
func TestLayerHasNoShellAndAStaticBinary(t *testing.T) {
	r := built(t)
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "arm": elf.EM_ARM}
	for _, arch := range Arches {
		hdrs, files := readTar(t, uncompressedLayer(t, r.Images[arch]))
		var names []string
		for _, h := range hdrs {
			names = append(names, h.Name)
		}
		want := []string{"etc/", "etc/group", "etc/passwd", "etc/ssl/", "etc/ssl/certs/",
			"etc/ssl/certs/ca-certificates.crt", "home/", "home/nonroot/", "reloader", "tmp/"}
		if !slices.Equal(names, want) {
			t.Errorf("linux/%s layer holds %v, want exactly %v", arch, names, want)
		}
		if !bytes.Equal(files["etc/ssl/certs/ca-certificates.crt"], CABundle()) {
			t.Errorf("linux/%s: CA bundle is not the pinned one", arch)
		}

		f, err := elf.NewFile(bytes.NewReader(files["reloader"]))
		if err != nil {
			t.Fatalf("linux/%s: /reloader is no ELF file: %v", arch, err)
		}
		if f.Machine != machines[arch] {
			t.Errorf("linux/%s: binary for %v", arch, f.Machine)
		}
		bi, err := buildinfo.Read(bytes.NewReader(files["reloader"]))
		if err != nil {
			t.Fatalf("linux/%s: no Go build info: %v", arch, err)
		}
		// The ARM version the 32-bit binary needs is in no ELF header; Go records it.
		if arch == "arm" && setting(bi, "GOARM") != "7" {
			t.Errorf("linux/arm: built with GOARM=%q, want 7 (the index says arm/v7)", setting(bi, "GOARM"))
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("linux/%s: binary has a %v segment, so it is not static", arch, p.Type)
			}
		}
		if libs, _ := f.ImportedLibraries(); len(libs) != 0 {
			t.Errorf("linux/%s: binary needs %v", arch, libs)
		}
		t.Logf("linux/%s: static %v binary, %d bytes", arch, f.Machine, len(files["reloader"]))
	}
}

// setting is the value of a build setting (GOARCH, GOARM, ...) the binary records.
func setting(bi *buildinfo.BuildInfo, key string) string {
	for _, s := range bi.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

func digest(t *testing.T, d interface{ Digest() (v1.Hash, error) }) v1.Hash {
	t.Helper()
	h, err := d.Digest()
	testutil.Must(t, err)
	return h
}

func uncompressedLayer(t *testing.T, img v1.Image) []byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	testutil.Must(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	testutil.Must(t, err)
	return b
}

// treeDigests maps each file under dir (by relative path) to the SHA-256 of its content.
func treeDigests(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	sums := map[string][32]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		sums[rel] = sha256.Sum256(b)
		return nil
	})
	testutil.Must(t, err)
	return sums
}
