package image

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/reloader-operator/reloader/internal/testutil"
)

// readTar returns the headers in order and the contents of regular files.
func readTar(t *testing.T, data []byte) ([]*tar.Header, map[string][]byte) {
	t.Helper()
	var hdrs []*tar.Header
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return hdrs, files
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		hdrs = append(hdrs, h)
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatalf("read %s: %v", h.Name, err)
			}
			files[h.Name] = b
		}
	}
}

func TestRootFS(t *testing.T) {
	mtime := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	binary := []byte("\x7fELF not really")
	layer, err := RootFS(binary, mtime)
	testutil.Must(t, err)
	hdrs, files := readTar(t, layer)

	type want struct {
		mode     int64
		uid, gid int
		dir      bool
	}
	expected := []struct {
		name string
		want
	}{
		{"etc/", want{0o755, 0, 0, true}},
		{"etc/group", want{0o644, 0, 0, false}},
		{"etc/passwd", want{0o644, 0, 0, false}},
		{"etc/ssl/", want{0o755, 0, 0, true}},
		{"etc/ssl/certs/", want{0o755, 0, 0, true}},
		{"etc/ssl/certs/ca-certificates.crt", want{0o644, 0, 0, false}},
		{"home/", want{0o755, 0, 0, true}},
		{"home/nonroot/", want{0o700, 65532, 65532, true}},
		{"reloader", want{0o755, 0, 0, false}},
		{"tmp/", want{0o1777, 0, 0, true}},
	}
	if len(hdrs) != len(expected) {
		var names []string
		for _, h := range hdrs {
			names = append(names, h.Name)
		}
		t.Fatalf("entries %v, want %d entries", names, len(expected))
	}
	for i, e := range expected {
		h := hdrs[i]
		if h.Name != e.name {
			t.Errorf("entry %d is %q, want %q (sorted)", i, h.Name, e.name)
			continue
		}
		if got := h.Typeflag == tar.TypeDir; got != e.dir {
			t.Errorf("%s: directory %v, want %v", h.Name, got, e.dir)
		}
		if h.Mode != e.mode || h.Uid != e.uid || h.Gid != e.gid {
			t.Errorf("%s: mode %o uid %d gid %d, want %o %d %d", h.Name, h.Mode, h.Uid, h.Gid, e.mode, e.uid, e.gid)
		}
		if !h.ModTime.Equal(mtime) {
			t.Errorf("%s: mtime %v, want %v", h.Name, h.ModTime, mtime)
		}
		if h.Uname != "" || h.Gname != "" || !h.AccessTime.IsZero() || !h.ChangeTime.IsZero() {
			t.Errorf("%s: carries build-machine data: uname %q gname %q atime %v ctime %v", h.Name, h.Uname, h.Gname, h.AccessTime, h.ChangeTime)
		}
	}

	if !bytes.Equal(files["reloader"], binary) {
		t.Errorf("binary not stored as given")
	}
	if !strings.Contains(string(files["etc/passwd"]), "\nnonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd has no nonroot 65532:\n%s", files["etc/passwd"])
	}
	if !strings.Contains(string(files["etc/group"]), "\nnonroot:x:65532:") {
		t.Errorf("/etc/group has no nonroot 65532:\n%s", files["etc/group"])
	}

	again, err := RootFS(binary, mtime)
	testutil.Must(t, err)
	if !bytes.Equal(layer, again) {
		t.Errorf("two builds of the layer differ")
	}
}

func TestCABundle(t *testing.T) {
	pemBytes := CABundle()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		t.Fatal("CA bundle holds no certificate")
	}
	n := 0
	for rest := pemBytes; ; n++ {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			if len(bytes.TrimSpace(rest)) != 0 {
				t.Fatalf("trailing bytes after %d certificates", n)
			}
			break
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			t.Fatalf("certificate %d: %v", n, err)
		}
	}
	// NSS ships over a hundred server roots; far fewer means the bundle came out wrong.
	if n < 100 {
		t.Errorf("%d roots in the bundle, want the NSS set (>100)", n)
	}
	if !bytes.Equal(pemBytes, CABundle()) {
		t.Error("CA bundle differs between calls")
	}
	t.Logf("%d roots, %d bytes", n, len(pemBytes))
}

func TestTag(t *testing.T) {
	for _, tc := range []struct{ version, tag string }{
		{"v1.2.3", "v1.2.3"},
		{"v1.2.3-4-gabc1234-dirty", "v1.2.3-4-gabc1234-dirty"},
		{"v1.2.3+build.5", "v1.2.3-build.5"},
		{"aaa87f0", "aaa87f0"},
		{".hidden", "hidden"},
		{"feature/x", "feature-x"},
		{"", "dev"},
		{strings.Repeat("a", 200), strings.Repeat("a", 128)},
	} {
		if got := Tag(tc.version); got != tc.tag {
			t.Errorf("Tag(%q) = %q, want %q", tc.version, got, tc.tag)
		}
	}
}

func TestSourceDate(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1767323045")
	got, err := SourceDate(t.Context(), ".")
	testutil.Must(t, err)
	if want := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC); !got.Equal(want) {
		t.Errorf("SourceDate = %v, want %v", got, want)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	if _, err := SourceDate(t.Context(), "."); err == nil {
		t.Error("SOURCE_DATE_EPOCH=yesterday accepted")
	}
}
