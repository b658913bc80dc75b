package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/buildinfo"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"sigs.k8s.io/yaml"

	"github.com/reloader-operator/reloader/internal/testutil"
)

// What the test release is stamped with; any fixed values do.
const (
	testVersion = "v0.0.0-disttest"
	testCommit  = "0123456789abcdef0123456789abcdef01234567"
)

var testCreated = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Cross-compiling for four platforms is the slow part: build once per test process, into a
// directory TestMain removes.
var (
	distRoot string
	distOnce sync.Once
	distRes  *Artifacts
	distErr  error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "reloader-dist-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	distRoot = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func testOptions(t *testing.T) Options {
	t.Helper()
	root, err := filepath.Abs("../..")
	testutil.Must(t, err)
	return Options{RepoRoot: root, Version: testVersion, Commit: testCommit, Created: testCreated, GitHubRepo: "example/reloader"}
}

// built is the release `make dist VERSION=v0.0.0-disttest` would write.
func built(t *testing.T) *Artifacts {
	t.Helper()
	distOnce.Do(func() { distRes, distErr = Build(t.Context(), filepath.Join(distRoot, "first"), testOptions(t)) })
	if distErr != nil {
		t.Fatalf("build the release: %v", distErr)
	}
	return distRes
}

// krewPlugin is what krew reads of a manifest (krew's index.Plugin, v1alpha2); unmarshalled
// strictly, so a misspelt field fails.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Caveats          string `json:"caveats"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Bin    string `json:"bin"`
		} `json:"platforms"`
	} `json:"spec"`
}

// TestKrewManifest reads the rendered manifest as krew would, and each platform's archive
// from the release as krew installs it: the right bytes, the bin it names, executable, built
// for that platform with the release's version.
func TestKrewManifest(t *testing.T) {
	a := built(t)
	if a.Krew != KrewManifest {
		t.Fatalf("no krew manifest rendered for %s", testVersion)
	}
	raw, err := os.ReadFile(filepath.Join(a.Dir, a.Krew))
	testutil.Must(t, err)
	var p krewPlugin
	if err := yaml.UnmarshalStrict(raw, &p); err != nil {
		t.Fatalf("%s: %v\n%s", a.Krew, err, raw)
	}
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" || p.Metadata.Name != "reloader" {
		t.Errorf("manifest is %s %s %q", p.APIVersion, p.Kind, p.Metadata.Name)
	}
	if p.Spec.Version != testVersion || p.Spec.Homepage != "https://github.com/example/reloader" {
		t.Errorf("version %q homepage %q", p.Spec.Version, p.Spec.Homepage)
	}
	// krew-index asks for a one-line summary; its validation warns past 50 characters.
	if n := len(p.Spec.ShortDescription); n == 0 || n > 50 || p.Spec.Description == "" {
		t.Errorf("shortDescription %q (%d characters), description %d characters", p.Spec.ShortDescription, n, len(p.Spec.Description))
	}
	if strings.Contains(string(raw), "{{") || strings.Contains(string(raw), "<no value>") {
		t.Errorf("placeholders left in the manifest:\n%s", raw)
	}
	var platforms []Platform
	for _, pl := range p.Spec.Platforms {
		plat := Platform{pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"]}
		platforms = append(platforms, plat)
		if len(pl.Selector.MatchLabels) != 2 {
			t.Errorf("%s: selector %v", plat, pl.Selector.MatchLabels)
		}
		name := ArchiveName(PluginBin, testVersion, plat)
		if want := "https://github.com/example/reloader/releases/download/" + testVersion + "/" + name; pl.URI != want {
			t.Errorf("%s: uri %s, want %s", plat, pl.URI, want)
		}
		data, err := os.ReadFile(filepath.Join(a.Dir, filepath.Base(pl.URI)))
		if err != nil {
			t.Errorf("%s: the archive the manifest names is not in the release: %v", plat, err)
			continue
		}
		if got := sha256Hex(data); pl.SHA256 != got {
			t.Errorf("%s: manifest sha256 %s, the archive's is %s", plat, pl.SHA256, got)
		}
		if pl.Bin != PluginBin {
			t.Errorf("%s: bin %q", plat, pl.Bin)
		}
		files := untar(t, data)
		checkBinary(t, plat, files[pl.Bin])
		if got := files[CompletionBin]; got == nil || !strings.Contains(string(got.data), PluginBin+" __complete") {
			t.Errorf("%s: no completion helper %s in %s", plat, CompletionBin, name)
		}
	}
	if !slices.Equal(platforms, Platforms) {
		t.Errorf("manifest platforms %v, want %v", platforms, Platforms)
	}
}

// TestKrewTemplate: the template in the repository parses, names only functions
// RenderKrew has, and refuses what it should.
func TestKrewTemplate(t *testing.T) {
	tmpl, err := os.ReadFile(filepath.Join(testOptions(t).RepoRoot, KrewTemplate))
	testutil.Must(t, err)
	if _, err := template.New("krew").Funcs(template.FuncMap{
		"archive": func(_, _ string) string { return "" }, "sha256": func(string) string { return "" }}).Parse(string(tmpl)); err != nil {
		t.Fatal(err)
	}
	data := KrewData{TagName: "v1.2.3"}
	sums := map[string]string{}
	for _, p := range Platforms {
		sums[ArchiveName(PluginBin, "v1.2.3", p)] = strings.Repeat("ab", 32)
	}
	out, err := RenderKrew(string(tmpl), data, sums)
	testutil.Must(t, err)
	if !strings.Contains(string(out), "uri: https://github.com/reloader-operator/reloader/releases/download/v1.2.3/kubectl-reloader_v1.2.3_darwin_arm64.tar.gz\n") {
		t.Errorf("rendered without the default repository's URL:\n%s", out)
	}
	delete(sums, ArchiveName(PluginBin, "v1.2.3", Platforms[2]))
	if _, err := RenderKrew(string(tmpl), data, sums); err == nil || !strings.Contains(err.Error(), "no file kubectl-reloader_v1.2.3_darwin_amd64.tar.gz") {
		t.Errorf("rendered with a missing archive: %v", err)
	}
	for _, v := range []string{"0.1.0", "v1.2", "v1.2.3-4-gabc1234-dirty ", "dev"} {
		if _, err := RenderKrew(string(tmpl), KrewData{TagName: v}, sums); err == nil {
			t.Errorf("rendered for version %q, which krew refuses", v)
		}
	}
}

var checksumLine = regexp.MustCompile(`^[0-9a-f]{64}  [^/ ]+$`)

// TestChecksums: checksums.txt, as sha256sum -c reads it, covers every other file of the
// release with its true sum.
func TestChecksums(t *testing.T) {
	a := built(t)
	raw, err := os.ReadFile(filepath.Join(a.Dir, ChecksumsFile))
	testutil.Must(t, err)
	listed := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		if !checksumLine.MatchString(line) {
			t.Errorf("checksums.txt line %q", line)
			continue
		}
		sum, name, _ := strings.Cut(line, "  ")
		listed[name] = sum
	}
	entries, err := os.ReadDir(a.Dir)
	testutil.Must(t, err)
	var names []string
	for _, e := range entries {
		if e.Name() == ChecksumsFile {
			continue
		}
		names = append(names, e.Name())
		data, err := os.ReadFile(filepath.Join(a.Dir, e.Name()))
		testutil.Must(t, err)
		if got := sha256Hex(data); listed[e.Name()] != got {
			t.Errorf("%s: checksums.txt says %q, the file's is %s", e.Name(), listed[e.Name()], got)
		}
	}
	// Per platform two archives, and the chart and the krew manifest.
	if want := 2*len(Platforms) + 2; len(names) != want || len(listed) != want {
		t.Errorf("release holds %v, checksums.txt lists %d; want %d files", names, len(listed), want)
	}
	for _, p := range Platforms {
		files := untar(t, mustRead(t, filepath.Join(a.Dir, a.Archives[p][0])))
		if len(files) != 1 {
			t.Errorf("%s: %s holds %d files, want only %s", p, a.Archives[p][0], len(files), ControllerBin)
		}
		checkBinary(t, p, files[ControllerBin])
	}
}

// TestChart: the chart package carries the release's version, and as appVersion the tag
// `make image` gives the image of that version.
func TestChart(t *testing.T) {
	a := built(t)
	if a.Chart != "reloader-0.0.0-disttest.tgz" {
		t.Errorf("chart package %q", a.Chart)
	}
	ch, err := loader.Load(filepath.Join(a.Dir, a.Chart))
	testutil.Must(t, err)
	if ch.Metadata.Version != "0.0.0-disttest" || ch.Metadata.AppVersion != testVersion {
		t.Errorf("chart version %q appVersion %q", ch.Metadata.Version, ch.Metadata.AppVersion)
	}
	// What Artifact Hub shows and scans is the released image, and a pre-release is one.
	ann := ch.Metadata.Annotations
	if want := "image: ghcr.io/reloader-operator/reloader:" + testVersion + "\n"; !strings.Contains(ann[imagesAnnotation], want) {
		t.Errorf("%s does not name the released image (%q):\n%s", imagesAnnotation, want, ann[imagesAnnotation])
	}
	if ann[prereleaseAnnotation] != "true" {
		t.Errorf("%s = %q for %s", prereleaseAnnotation, ann[prereleaseAnnotation], testVersion)
	}
	if ch.Metadata.KubeVersion == "" || len(ch.Templates) == 0 {
		t.Errorf("packaged chart lost its kubeVersion or templates")
	}
}

// TestArchivesAreReproducible builds the release a second time, elsewhere, and compares
// every archive and the krew manifest byte for byte.
func TestArchivesAreReproducible(t *testing.T) {
	first := built(t)
	opts := testOptions(t)
	opts.NoChart = true
	second, err := Build(t.Context(), filepath.Join(distRoot, "second"), opts)
	testutil.Must(t, err)
	if len(second.Sums) != len(first.Sums)-1 {
		t.Errorf("second build wrote %d files, first %d (with the chart)", len(second.Sums), len(first.Sums))
	}
	for name, sum := range second.Sums {
		if first.Sums[name] != sum {
			t.Errorf("%s differs between two builds", name)
		}
	}
}

type file struct {
	mode int64
	data []byte
}

// untar reads a .tar.gz as krew and tar unpack it: regular files only, no paths.
func untar(t *testing.T, data []byte) map[string]*file {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	testutil.Must(t, err)
	tr := tar.NewReader(zr)
	files := map[string]*file{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		testutil.Must(t, err)
		if h.Typeflag != tar.TypeReg || strings.Contains(h.Name, "/") || h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(testCreated) {
			t.Errorf("entry %q: type %c, uid %d, gid %d, mtime %v", h.Name, h.Typeflag, h.Uid, h.Gid, h.ModTime)
		}
		b, err := io.ReadAll(tr)
		testutil.Must(t, err)
		files[h.Name] = &file{mode: h.Mode, data: b}
	}
}

// checkBinary: an executable Go binary for p, stamped with the release's version.
func checkBinary(t *testing.T, p Platform, f *file) {
	t.Helper()
	if f == nil {
		t.Errorf("%s: binary missing", p)
		return
	}
	if f.mode != 0o755 {
		t.Errorf("%s: binary mode %o", p, f.mode)
	}
	bi, err := buildinfo.Read(bytes.NewReader(f.data))
	if err != nil {
		t.Errorf("%s: not a Go binary: %v", p, err)
		return
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if settings["GOOS"] != p.OS || settings["GOARCH"] != p.Arch || settings["CGO_ENABLED"] != "0" {
		t.Errorf("%s: built for %s/%s, CGO_ENABLED=%s", p, settings["GOOS"], settings["GOARCH"], settings["CGO_ENABLED"])
	}
	// -trimpath keeps -ldflags out of the build info; the stamped string is in the data.
	if !bytes.Contains(f.data, []byte(testVersion)) || !bytes.Contains(f.data, []byte(testCommit)) {
		t.Errorf("%s: version %s and commit %s not stamped", p, testVersion, testCommit)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	testutil.Must(t, err)
	return b
}
