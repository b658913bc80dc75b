package docs

import (
	"os"
	"testing"

	"github.com/reloader-operator/reloader/internal/devtools/loadtest"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// Every table of load-test figures in the pages is what `make figures` renders from the
// results committed under docs/results/: a figure is never pasted or edited by hand.
func TestFiguresRenderedFromResults(t *testing.T) {
	blocks := 0
	for _, page := range pages(t) {
		b, err := os.ReadFile(page)
		testutil.Must(t, err)
		// Marker paths are relative to the repository's root, where make runs.
		out, n, err := loadtest.UpdateFigures(string(b), "..")
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
