package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reloader-operator/reloader/internal/testutil"
)

// TestRun builds the host architecture's image through the command line `make image` uses,
// with SOURCE_DATE_EPOCH fixing the time, and checks the files and the report.
func TestRun(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1767323045")
	out := t.TempDir()
	var stdout bytes.Buffer
	err := run(t.Context(), []string{"--out", out, "--repo", "../../..", "--version", "v9.8.7+meta",
		"--commit", "abc123", "--arch", "amd64"}, &stdout)
	testutil.Must(t, err)
	report := stdout.String()
	t.Log(report)
	for _, want := range []string{
		"ghcr.io/reloader-operator/reloader:v9.8.7-meta (created 2026-01-02T03:04:05Z)",
		"index  sha256:",
		"linux/amd64  sha256:",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, f := range []string{"oci/index.json", "oci/oci-layout", "reloader-v9.8.7-meta-linux-amd64.tar"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "reloader-v9.8.7-meta-linux-arm64.tar")); !os.IsNotExist(err) {
		t.Errorf("arm64 tarball written though --arch amd64 (%v)", err)
	}
}
