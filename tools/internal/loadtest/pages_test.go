package loadtest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/reloader-operator/reloader/internal/testutil"
)

// repoRoot is the repository's root, seen from this package's directory: where make runs,
// and what the figures markers' paths are relative to.
const repoRoot = "../../.."

// Every table of load-test figures in the pages (README.md, DEVELOPMENT.md, docs/*.md) is what
// `make figures` renders from the results committed under docs/results/: a figure is never
// pasted or edited by hand.
func TestFiguresRenderedFromResults(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	testutil.Must(t, err)
	if len(docs) == 0 {
		t.Fatal("no pages in docs/")
	}
	pages := append([]string{filepath.Join(repoRoot, "README.md"), filepath.Join(repoRoot, "DEVELOPMENT.md")}, docs...)
	blocks := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		testutil.Must(t, err)
		out, n, err := UpdateFigures(string(b), repoRoot)
		if err != nil {
			t.Errorf("%s: %v", page, err)
			continue
		}
		blocks += n
		if out != string(b) {
			t.Errorf("%s: a figures block differs from what its results render: run `make figures`", page)
		}
	}
	t.Logf("%d figures blocks checked", blocks)
}
